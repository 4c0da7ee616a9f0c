# Sanitizer and fuzzer builds (clang only; scripts/test-sanitizers.sh
# configures one). They apply to every target in the tree, so they are set
# before any target is made.
#
#   -DHYLLM_SANITIZE=ON  AddressSanitizer + UndefinedBehaviorSanitizer; any
#                        report aborts the program (no recovery).
#   -DHYLLM_FUZZ=ON      also builds the libFuzzer targets of tests/fuzz: the
#                        code is compiled with coverage instrumentation
#                        (fuzzer-no-link) and each target links libFuzzer.
option(HYLLM_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer (clang)" OFF)
option(HYLLM_FUZZ "Build the libFuzzer targets under tests/fuzz (clang; implies HYLLM_SANITIZE)" OFF)

if(HYLLM_FUZZ)
  set(HYLLM_SANITIZE ON)
endif()

if(HYLLM_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "HYLLM_SANITIZE and HYLLM_FUZZ need clang (CMAKE_CXX_COMPILER=clang++-14)")
  endif()
  # nvcc does not compile host code with the sanitizers; CUDA is checked by
  # compute-sanitizer on the GPU machine instead (tools/cuda/sanitize.sh).
  set(HYLLM_ENABLE_CUDA OFF CACHE BOOL "" FORCE)
  set(sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
      -gline-tables-only)
  add_compile_options(${sanitize_flags})
  add_link_options(-fsanitize=address,undefined)
  if(HYLLM_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  message(STATUS "hyllm: sanitizer build (ASan + UBSan)")
endif()
