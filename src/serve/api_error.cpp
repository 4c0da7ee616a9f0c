#include "serve/api_error.h"

#include <fmt/format.h>

#include <new>

namespace hyllm::serve {

const char* error_type_for_status(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 408: return "RequestTimeoutError";
    case 413: return "RequestEntityTooLargeError";
    case 414: return "URITooLongError";
    case 415: return "UnsupportedMediaTypeError";
    case 429: return "RateLimitError";
    case 431: return "RequestHeaderFieldsTooLargeError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

const char* ApiError::type() const { return error_type_for_status(status_); }

Json ApiError::to_json() const {
  Json err = {
      {"message", what()},
      {"type", type()},
      {"param", param_ ? Json(*param_) : Json(nullptr)},
      {"code", status_},
  };
  return {{"error", std::move(err)}};
}

std::string ApiError::body() const {
  return to_json().dump(-1, ' ', false, Json::error_handler_t::replace);
}

ApiError bad_request(std::string message, std::optional<std::string> param) {
  return ApiError(400, std::move(message), std::move(param));
}

ApiError model_not_found(const std::string& model) {
  return ApiError(404, fmt::format("The model `{}` does not exist.", model), "model");
}

ApiError unauthorized() { return ApiError(401, "Unauthorized"); }

ApiError unavailable(std::string message) { return ApiError(503, std::move(message)); }

ApiError api_error_from(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kResourceExhausted:
      return ApiError(400, e.what());
    case ErrorCode::kNotFound:
      return ApiError(404, e.what());
    case ErrorCode::kUnavailable:
    case ErrorCode::kCancelled:
      return ApiError(503, e.what());
    default:
      return ApiError(500, e.what());
  }
}

ApiError api_error_from_exception(std::exception_ptr ep) {
  try {
    if (ep) std::rethrow_exception(ep);
    return ApiError(500, "unknown error");
  } catch (const ApiError& e) {
    return e;
  } catch (const Error& e) {
    return api_error_from(e);
  } catch (const Json::exception& e) {
    return ApiError(400, fmt::format("Invalid request: {}", e.what()));
  } catch (const std::bad_alloc&) {
    return ApiError(500, "out of memory while handling the request");
  } catch (const std::exception& e) {
    return ApiError(500, e.what());
  } catch (...) {
    return ApiError(500, "unknown error");
  }
}

}  // namespace hyllm::serve
