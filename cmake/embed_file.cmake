# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -DNAMESPACE=ns -P embed_file.cmake
# Writes a C++ source that holds INPUT's bytes as `const unsigned char SYMBOL[]`
# and its size as `const std::size_t SYMBOL_size`, so that a file ships inside
# the binary and nothing is read from disk at run time.
foreach(var INPUT OUTPUT SYMBOL NAMESPACE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
  "// Generated from ${name} by cmake/embed_file.cmake; do not edit.\n"
  "#include <cstddef>\n\n"
  "namespace ${NAMESPACE} {\n\n"
  "extern const unsigned char ${SYMBOL}[] = {\n  ${bytes}0x00};\n"
  "extern const std::size_t ${SYMBOL}_size = ${size};\n\n"
  "}  // namespace ${NAMESPACE}\n")
