# hyllm_library(NAME DIR [CUDA] DEPS ...): one static library per layer, its
# sources globbed from DIR (non-recursive unless RECURSE) so that adding a file
# needs no CMake edit. What a layer may use is exactly what DEPS lists.
function(hyllm_library name dir)
  cmake_parse_arguments(ARG "RECURSE;CUDA" "" "DEPS;PRIVATE_DEPS;EXCLUDE" ${ARGN})
  set(patterns ${dir}/*.cpp)
  if(ARG_CUDA)
    list(APPEND patterns ${dir}/*.cu)
  endif()
  if(ARG_RECURSE)
    file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${patterns})
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${patterns})
  endif()
  foreach(ex ${ARG_EXCLUDE})
    list(FILTER srcs EXCLUDE REGEX "${ex}")
  endforeach()
  if(NOT srcs)
    # A layer whose folder is still empty links as an empty library.
    set(empty ${PROJECT_BINARY_DIR}/generated/empty_${name}.cpp)
    file(WRITE ${empty} "// ${name} has no sources yet\n")
    set(srcs ${empty})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS} hyllm_warnings)
endfunction()

# hyllm_test(NAME DIR DEPS ...): one GoogleTest program per test folder.
function(hyllm_test name dir)
  cmake_parse_arguments(ARG "" "" "DEPS;LABELS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${dir}/*.cpp)
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock hyllm_warnings)
  target_compile_definitions(${name} PRIVATE
    HYLLM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    HYLLM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  include(GoogleTest)
  # Listing the tests loads the program's libraries (cuBLASLt and NCCL for
  # the CUDA tests: hundreds of MB), which on a cold or busy machine takes
  # longer than CMake's default 5 s.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 1200)
endfunction()
