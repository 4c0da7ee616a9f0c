#include "backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backend/cpu/cpu_kernels.h"

namespace hyllm {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }

  void* allocate(size_t nbytes) override {
    void* p = std::aligned_alloc(256, (nbytes + 255) / 256 * 256);
    if (p == nullptr) fail(ErrorCode::kOutOfMemory, "host allocation of {} bytes failed", nbytes);
    return p;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
  // Empty ranges may come with null pointers (an empty cache, a zero-size
  // buffer), which the C library functions must not be given.
  void copy_to_device(void* dst, const void* src, size_t n) override {
    if (n > 0) std::memcpy(dst, src, n);
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    if (n > 0) std::memcpy(dst, src, n);
  }
  void copy_on_device(void* dst, const void* src, size_t n) override {
    if (n > 0) std::memmove(dst, src, n);
  }
  void fill_zero(void* dst, size_t n) override {
    if (n > 0) std::memset(dst, 0, n);
  }
  void synchronize() override {}
  // Free is the kernel's MemAvailable (what can be had without swapping,
  // page cache included), not MemFree, which a host that just read a
  // checkpoint from disk has little of.
  MemoryInfo memory_info() const override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    size_t available = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(page);
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    size_t kib = 0;
    while (meminfo >> key >> kib) {
      if (key == "MemAvailable:") {
        available = kib * 1024;
        break;
      }
      meminfo.ignore(64, '\n');
    }
    return {static_cast<size_t>(pages) * static_cast<size_t>(page), available};
  }
  Kernels& kernels() override { return kernels_; }

 private:
  CpuKernels kernels_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace hyllm
