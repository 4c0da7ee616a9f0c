#pragma once
// A backend that forwards every call to the CPU backend, for tests that
// record or script one part of the interface by overriding just that part.

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace hyllm {

class CpuForwardingBackend : public Backend {
 public:
  Device device() const override { return cpu_->device(); }
  std::string name() const override { return "forwarding " + cpu_->name(); }
  void* allocate(size_t n) override { return cpu_->allocate(n); }
  void deallocate(void* p) override { cpu_->deallocate(p); }
  void copy_to_device(void* d, const void* s, size_t n) override { cpu_->copy_to_device(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { cpu_->copy_to_host(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override { cpu_->copy_on_device(d, s, n); }
  void fill_zero(void* d, size_t n) override { cpu_->fill_zero(d, n); }
  void synchronize() override { cpu_->synchronize(); }
  MemoryInfo memory_info() const override { return cpu_->memory_info(); }
  Kernels& kernels() override { return cpu_->kernels(); }

 protected:
  Backend& cpu() { return *cpu_; }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

}  // namespace hyllm
