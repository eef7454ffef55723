// The metric sinks without a run: frames from a step record, the Prometheus text, histogram
// buckets, and the HTTP server's errors.
#include "runtime/metrics/metric_sinks.hpp"

#include <gtest/gtest.h>

#include "runtime/driver/driver.hpp"
#include "runtime/http/http_server.hpp"
#include "runtime/metrics/prometheus_sink.hpp"
#include "runtime/metrics/tensorboard_sink.hpp"

namespace milesrt::runtime {

step_record sample_record() {
  step_record r;
  r.step = 3;
  r.version = 3;
  r.seconds = 0.5;
  r.busy_seconds = {{"stage", 0.25}};
  r.active_seconds = {{"stage", 0.125}};
  r.idle_seconds = 0.0625;
  r.staleness = {{0, 3}, {1, 1}};
  r.counters.admitted = 12;
  r.counters.in_flight = 2;
  r.metrics = {{"loss", 0.125}};
  r.lists = {{"length", {3, 1, 3}}};
  return r;
}

TEST(MetricFrame, HoldsEveryValueOfAStepWithTags) {
  auto f = to_frame(sample_record(), 7.0);
  std::map<std::string, double> by_tag;
  for (const auto& v : f.values) by_tag[v.tag()] = v.value;
  EXPECT_EQ(by_tag.at("run/version"), 3);
  EXPECT_EQ(by_tag.at("run/busy_seconds/stage"), 0.25);
  EXPECT_EQ(by_tag.at("run/active_seconds/stage"), 0.125);
  EXPECT_EQ(by_tag.at("run/idle_seconds"), 0.0625);
  EXPECT_EQ(by_tag.at("counters/admitted"), 12);
  EXPECT_EQ(by_tag.at("loss"), 0.125);
  ASSERT_EQ(f.distributions.size(), 2u);
  EXPECT_EQ(f.distributions[0].tag(), "run/staleness");
  EXPECT_EQ(f.distributions[1].counts, (std::vector<std::pair<double, double>>{{1, 1}, {3, 2}}));
}

TEST(PrometheusSink, RendersFamiliesWithTypesAndLabels) {
  http_server server(0);
  prometheus_sink sink(server);
  sink.on_step(to_frame(sample_record(), 1.0));
  std::string text = sink.render();
  EXPECT_NE(text.find("# TYPE milesrt_admitted_total counter\nmilesrt_admitted_total 12\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("milesrt_busy_seconds{actor=\"stage\"} 0.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE milesrt_in_flight gauge\nmilesrt_in_flight 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("milesrt_loss 0.125\n"), std::string::npos) << text;
}

TEST(TensorboardSink, BucketsAreExactOrOfEqualWidth) {
  metric_distribution d{"", "x", {{1, 2}, {2, 1}, {5, 1}}};
  EXPECT_EQ(histogram_buckets(d), d.counts);
  auto b = histogram_buckets(d, 2);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::pair<double, double>{3, 3}));
  EXPECT_EQ(b[1], (std::pair<double, double>{5, 1}));
}

TEST(HttpServer, APortInUseIsAnErrorNamingIt) {
  http_server first(0);
  try {
    http_server second(first.port());
    FAIL() << "a second server bound the same port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
        std::string::npos)
        << e.what();
  }
}

}  // namespace milesrt::runtime
