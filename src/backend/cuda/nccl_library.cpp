#include "backend/cuda/nccl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "util/status.h"

namespace hyllm::cuda {

namespace {

NcclLibrary load() {
  void* handle = nullptr;
  std::string why;
  for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    why = dlerror();
  }
  if (handle == nullptr)
    fail(ErrorCode::kUnavailable, "tensor parallelism on CUDA needs NCCL (libnccl.so.2), which the dynamic loader "
         "did not find ({}): install it (it ships with the CUDA toolkit and with PyTorch's nvidia-nccl package) or "
         "add its folder to LD_LIBRARY_PATH", why);
  NcclLibrary lib;
  auto resolve = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    if (fn == nullptr) fail(ErrorCode::kUnavailable, "the NCCL library found lacks {}: NCCL 2.19 or newer is needed", symbol);
  };
  resolve(lib.CommInitAll, "ncclCommInitAll");
  resolve(lib.CommFinalize, "ncclCommFinalize");
  resolve(lib.CommDestroy, "ncclCommDestroy");
  resolve(lib.CommAbort, "ncclCommAbort");
  resolve(lib.AllReduce, "ncclAllReduce");
  resolve(lib.AllGather, "ncclAllGather");
  resolve(lib.GroupStart, "ncclGroupStart");
  resolve(lib.GroupEnd, "ncclGroupEnd");
  resolve(lib.GetErrorString, "ncclGetErrorString");
  return lib;  // the handle stays open for the process's life
}

}  // namespace

const NcclLibrary& nccl() {
  static std::once_flag once;
  static NcclLibrary lib;
  std::call_once(once, [] { lib = load(); });
  return lib;
}

}  // namespace hyllm::cuda
