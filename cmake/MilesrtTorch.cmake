# Locate libtorch from the PyPI wheel `torch==2.11.0`.
#
# The wheel ships libtorch's C++ headers, shared libraries and CMake config; its folder comes from
# `torch.utils.cmake_prefix_path`, asked of MILESRT_PYTHON (default: the project's venv made by
# .ci/install, else python3). The cu130 wheel's TorchConfig needs a CUDA 13 toolkit (it links
# libtorch_cuda and nvrtc); it does not need a GPU. Where no toolkit is found we link the CPU part
# of the wheel (libtorch_cpu + libc10) ourselves and build without CUDA.
#
# Defines the target milesrt::torch and MILESRT_TORCH_CUDA (ON when libtorch's CUDA part is linked).

set(MILESRT_PYTHON "$ENV{MILESRT_PYTHON}" CACHE FILEPATH "Python with torch==2.11.0 installed")
if(NOT MILESRT_PYTHON)
  foreach(_candidate "$ENV{MILESRT_VENV}/bin/python3" "/opt/milesrt/venv/bin/python3")
    if(EXISTS "${_candidate}")
      set(MILESRT_PYTHON "${_candidate}" CACHE FILEPATH "Python with torch==2.11.0 installed" FORCE)
      break()
    endif()
  endforeach()
endif()
if(NOT MILESRT_PYTHON)
  find_program(MILESRT_PYTHON_FOUND python3)
  set(MILESRT_PYTHON "${MILESRT_PYTHON_FOUND}" CACHE FILEPATH "Python with torch==2.11.0 installed" FORCE)
endif()

if(NOT Torch_DIR)
  execute_process(
    COMMAND "${MILESRT_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc)
  if(NOT _torch_rc EQUAL 0)
    message(FATAL_ERROR "milesrt: cannot import torch with ${MILESRT_PYTHON} (run .ci/install, or "
                        "set MILESRT_PYTHON or Torch_DIR): ${_torch_err}")
  endif()
  set(Torch_DIR "${_torch_prefix}/Torch" CACHE PATH "libtorch CMake config folder" FORCE)
endif()
message(STATUS "milesrt: libtorch CMake config at ${Torch_DIR}")

option(MILESRT_TORCH_CPU_ONLY "Link only the CPU part of libtorch, even where a CUDA toolkit is present" OFF)
find_package(CUDAToolkit QUIET)

add_library(milesrt_torch INTERFACE)
add_library(milesrt::torch ALIAS milesrt_torch)
# libtorch.so exports its own copies of std::filesystem (unversioned), which crash when called from
# our code. Listing libstdc++ before libtorch makes the dynamic linker find the real ones first.
target_link_libraries(milesrt_torch INTERFACE "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state")

if(CUDAToolkit_FOUND AND NOT MILESRT_TORCH_CPU_ONLY)
  # Silences TorchConfig's arch detection; we compile no .cu file against ATen.
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
  endif()
  find_package(Torch REQUIRED)
  target_link_libraries(milesrt_torch INTERFACE ${TORCH_LIBRARIES})
  target_compile_options(milesrt_torch INTERFACE ${TORCH_CXX_FLAGS})
  # Code that uses libtorch's CUDA API (streams, the caching allocator, CUDA graphs) checks this.
  target_compile_definitions(milesrt_torch INTERFACE MILESRT_TORCH_CUDA=1)
  set(MILESRT_TORCH_CUDA ON)
else()
  get_filename_component(_torch_root "${Torch_DIR}/../../.." ABSOLUTE)
  find_library(MILESRT_TORCH_CPU_LIB torch_cpu PATHS "${_torch_root}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(MILESRT_C10_LIB c10 PATHS "${_torch_root}/lib" NO_DEFAULT_PATH REQUIRED)
  target_include_directories(milesrt_torch SYSTEM INTERFACE
    "${_torch_root}/include" "${_torch_root}/include/torch/csrc/api/include")
  target_link_libraries(milesrt_torch INTERFACE
    "-Wl,--no-as-needed" ${MILESRT_TORCH_CPU_LIB} ${MILESRT_C10_LIB} "-Wl,--as-needed")
  if(CUDAToolkit_FOUND)
    # libtorch_cpu itself needs libcudart and libcupti from the toolkit at run time.
    target_link_options(milesrt_torch INTERFACE "-Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}")
  endif()
  set(MILESRT_TORCH_CUDA OFF)
  message(STATUS "milesrt: linking libtorch's CPU part only (${MILESRT_TORCH_CPU_LIB})")
endif()
