# CUDA is optional: the CPU backend is complete on its own. When nvcc exists the
# CUDA backend is built by default so that CI keeps compiling every kernel.
set(HYLLM_HAVE_CUDA OFF)
if(HYLLM_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag (it ignores CUDA_STANDARD 20 and
    # refuses targets that inherit CXX_STANDARD 20), so it is taught here.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    find_package(CUDAToolkit REQUIRED)
    set(HYLLM_HAVE_CUDA ON)
    set(HYLLM_CUDA_GENCODE -gencode=arch=compute_90a,code=sm_90a)
    if(HYLLM_CUDA_BLACKWELL)
      list(APPEND HYLLM_CUDA_GENCODE
        -gencode=arch=compute_100a,code=sm_100a
        -gencode=arch=compute_120a,code=sm_120a
        -gencode=arch=compute_121a,code=sm_121a)
    endif()
    set(HYLLM_CUDA_FLAGS --expt-relaxed-constexpr -lineinfo ${HYLLM_CUDA_GENCODE})
    message(STATUS "hyllm: CUDA backend enabled (${CMAKE_CUDA_COMPILER})")
  else()
    message(STATUS "hyllm: nvcc not found, building the CPU backend only")
  endif()
endif()
