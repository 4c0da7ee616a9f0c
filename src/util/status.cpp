#include "util/status.h"

namespace hyllm {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCorruptData: return "corrupt_data";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kIo: return "io";
  }
  return "unknown";
}

}  // namespace hyllm
