// Service edges: a `uses` port joined to a `serves` port is checked like a data edge, and the
// runtime hands every replica of the user all the server's replicas (the toy_asker / toy_doubler
// pair of runtime/testing/toy_service_kinds.cpp).
#include "runtime/core/services.hpp"

#include <caf/all.hpp>
#include <set>

#include "runtime/driver/driver_testing.hpp"

namespace milesrt::runtime {
namespace {

using namespace driver_testing;

/// src -> ask -> learner, ask.double -> doubler.double.
std::string service_graph(const std::string& ask_extra, const std::string& doubler_extra,
                          const std::string& service_edge = "") {
  return R"(name = "served",
  actors = [(name = "src", kind = "toy_source"),
            (name = "ask", kind = "toy_asker")" +
         ask_extra + R"(),
            (name = "doubler", kind = "toy_doubler")" +
         doubler_extra + R"(),
            (name = "learner", kind = "toy_learner")],
  edges = [(from = "src.items", to = "ask.items"),
           (from = "ask.items", to = "learner.items"),
           (from = "learner.weights", to = "ask.weights"))" +
         (service_edge.empty() ? R"(,
           (from = "ask.double", to = "doubler.double"))"
                               : service_edge) +
         R"(],
  schedule = (sync = void),
  run = (steps = 5, batchSize = 4, deadlineSeconds = 10))";
}

TEST_F(Driver, AServiceUserGetsEveryReplicaOfItsServer) {
  records steps;
  auto o = run(service_graph(", replicas = 2", ", replicas = 3"), &steps);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(steps.size(), 5u);
  check_run(o, steps, false, 0, 4);
  // The learner sums the doubled numbers 0..19: 2 * 190.
  EXPECT_EQ(steps.back().metrics.at("total"), 380.0);
  std::set<std::string> answered_by;
  for (const auto& r : steps)
    for (const auto& [name, value] : r.metrics)
      if (name.rfind("asked_replica_", 0) == 0) answered_by.insert(name);
  EXPECT_EQ(answered_by,
            (std::set<std::string>{"asked_replica_0", "asked_replica_1", "asked_replica_2"}));
}

class ServiceEdges : public testing::scratch_test {
 protected:
  std::string problems(const std::string& fields) {
    auto g = load("g.capnp", fields);
    if (!g) return "<load failed>";
    std::string s;
    for (const auto& d : graph::validate_structure(*g)) s += d.text() + "\n";
    for (const auto& d : graph::validate_kinds(*g, kinds_)) s += d.text() + "\n";
    return s;
  }
  /// A server of another service type, to be joined wrongly.
  void add_other_server() {
    kind_descriptor k;
    k.name = "other_server";
    k.role = role::stage;
    k.serves = {{"double", "other.type", ""}};
    k.spawn = [](caf::actor_system&, const actor_setup&) { return caf::actor{}; };
    kinds_.add(k);
  }
};

TEST_F(ServiceEdges, TheServedGraphIsRunnable) { EXPECT_EQ(problems(service_graph("", "")), ""); }

TEST_F(ServiceEdges, AUsesPortWithoutAnEdgeIsNamed) {
  auto s = problems(service_graph("", "", " "));
  EXPECT_NE(s.find("actor 'ask': port 'double' uses a service of type 'toy.double': no edge "
                   "joins it to a server"),
            std::string::npos)
      << s;
}

TEST_F(ServiceEdges, AUsesPortJoinedTwiceIsNamed) {
  auto fields = service_graph("", "", R"(, (from = "ask.double", to = "doubler.double"),
           (from = "ask.double", to = "doubler2.double"))");
  fields.replace(fields.find("(name = \"learner\""), 0,
                 "(name = \"doubler2\", kind = \"toy_doubler\"),\n");
  auto s = problems(fields);
  EXPECT_NE(s.find("actor 'ask': port 'double' uses a service of type 'toy.double': 2 edges join "
                   "it, one may"),
            std::string::npos)
      << s;
}

TEST_F(ServiceEdges, AServiceEdgeMustEndAtAServesPortOfItsType) {
  add_other_server();
  auto fields = service_graph("", "", R"(, (from = "ask.double", to = "doubler.triple"))");
  auto s = problems(fields);
  EXPECT_NE(s.find("edge 3 (ask.double -> doubler.triple): field 'to': ask.double uses a "
                   "service, but actor 'doubler' (kind toy_doubler) serves no port 'triple' "
                   "(serves: double)"),
            std::string::npos)
      << s;
  fields = service_graph("", "", R"(, (from = "ask.double", to = "other.double"))");
  fields.replace(fields.find("(name = \"learner\""), 0,
                 "(name = \"other\", kind = \"other_server\"),\n");
  s = problems(fields);
  EXPECT_NE(s.find("service type mismatch: ask.double uses 'toy.double' but other.double serves "
                   "'other.type'"),
            std::string::npos)
      << s;
}

TEST_F(ServiceEdges, AServiceEdgeHasNoCapacityAndIsNoDataEdge) {
  auto s = problems(
      service_graph("", "", R"(, (from = "ask.double", to = "doubler.double", capacity = 4))"));
  EXPECT_NE(s.find("field 'capacity': a service edge carries requests, not work items (0 only)"),
            std::string::npos)
      << s;
  s = problems(service_graph("", "",
                             R"(, (from = "ask.double", to = "doubler.double"),
           (from = "src.items", to = "doubler.double"))"));
  EXPECT_NE(s.find("field 'to': actor 'doubler' (kind toy_doubler) has no input port 'double' "
                   "(inputs: none); 'double' is a service it serves: join a uses port to it, "
                   "not an output"),
            std::string::npos)
      << s;
}

TEST_F(ServiceEdges, AServerIsDrivenByItsUsers) {
  // The doubler has no data edge at all; the service edge makes it reachable from the source.
  auto s = problems(service_graph("", ""));
  EXPECT_EQ(s.find("no schedule can drive it"), std::string::npos) << s;
}

TEST(ServiceLinks, PicksRoundRobinAndIsReplacedWhole) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto a = sys.spawn([] { return caf::behavior{[](int) {}}; });
  auto b = sys.spawn([] { return caf::behavior{[](int) {}}; });
  service_links links;
  EXPECT_FALSE(links.ready("p"));
  EXPECT_FALSE(links.pick("p"));
  links.set("p", {a, b});
  EXPECT_TRUE(links.ready("p"));
  EXPECT_EQ(links.pick("p"), a);
  EXPECT_EQ(links.pick("p"), b);
  EXPECT_EQ(links.pick("p"), a);
  links.set("p", {b});
  EXPECT_EQ(links.pick("p"), b);
  EXPECT_EQ(links.all("p").size(), 1u);
  EXPECT_TRUE(links.all("q").empty());
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace milesrt::runtime
