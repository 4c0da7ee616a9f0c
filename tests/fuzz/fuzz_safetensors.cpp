// A safetensors file: the input is the whole file (u64 header length, JSON
// header, data). Whatever open() accepts must keep its promises: every
// entry's bytes lie inside the file, entries are sorted and disjoint, and
// known dtypes span exactly numel x element size.

#include <cstdint>

#include "fuzz_util.h"
#include "model/loader/safetensors_file.h"

using namespace hyllm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemFile file(fuzz::as_text(data, size));
  fuzz::expect_clean_errors([&] {
    auto f = SafetensorsFile::open(file.path());
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
    const uint64_t data_size = size - 8 - header_len;  // open() checked the header fits
    uint64_t prev_end = 0;
    for (const SafetensorsEntry& e : f->entries()) {
      if (e.begin < prev_end || e.end < e.begin) fuzz::finding("entries overlap or are unsorted");
      prev_end = e.end;
      std::span<const std::byte> bytes = f->bytes(e);
      if (e.end > data_size || bytes.size() != e.nbytes()) fuzz::finding("an entry runs past the file");
      if (e.dtype && static_cast<uint64_t>(e.shape.numel()) * dtype_size(*e.dtype) != e.nbytes()) {
        fuzz::finding("size check let a wrong extent through");
      }
      if (!bytes.empty()) {
        volatile std::byte first = bytes.front();
        volatile std::byte last = bytes.back();
        (void)first;
        (void)last;
      }
      f->prefetch(e);
    }
  });
  return 0;
}
