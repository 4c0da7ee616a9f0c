#include "text/tokenizer/json_reader.h"

#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

// Ids above this are refused: a vocabulary that large is a corrupt file, and
// the id-indexed tables would be huge.
constexpr int64_t kMaxVocabId = 16 * 1024 * 1024;

using json = nlohmann::json;

class Handler {
 public:
  explicit Handler(TokenizerJson& out) : out_(out) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::kVocab) return vocab_entry(v);
    return value(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::kVocab) return vocab_entry(v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(json::number_float_t v, const std::string&) {
    if (mode_ == Mode::kVocab) return bad("vocab entry {:?} has no integer id", key_);
    return value(json(v));
  }
  bool string(std::string& s) {
    if (mode_ == Mode::kVocab) return bad("vocab entry {:?} has no integer id", key_);
    if (mode_ == Mode::kMerges) return merge_string(s);
    return value(json(std::move(s)));
  }
  bool binary(json::binary_t&) { return bad("binary values are not JSON"); }

  bool key(std::string& k) {
    if (mode_ == Mode::kVocab) {
      key_.swap(k);
      return true;
    }
    if (depth_ <= 2) path_[depth_ - 1] = k;
    key_.swap(k);
    return true;
  }

  bool start_object(std::size_t) {
    if (mode_ != Mode::kDom) return bad("unexpected object in model.{}", mode_ == Mode::kVocab ? "vocab" : "merges");
    ++depth_;
    if (depth_ == 3 && path_[0] == "model" && path_[1] == "vocab") {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      --depth_;
      return true;
    }
    --depth_;
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    if (mode_ == Mode::kVocab) return bad("unexpected list in model.vocab");
    ++depth_;
    if (mode_ == Mode::kMerges) {
      if (depth_ != 4) return bad("model.merges entries must be \"a b\" or [a, b]");
      pair_parts_ = 0;
      return true;
    }
    if (depth_ == 3 && path_[0] == "model" && path_[1] == "merges") {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() {
    if (mode_ == Mode::kMerges) {
      if (depth_ == 4) {
        if (pair_parts_ != 2) return bad("merge {} is not a pair", out_.merges.size());
        out_.merges.push_back(pending_);
        --depth_;
        return true;
      }
      mode_ = Mode::kDom;
      --depth_;
      return true;
    }
    --depth_;
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (error_.empty()) error_ = fmt::format("invalid JSON at byte {}: {}", position, e.what());
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges };

  template <typename... Args>
  bool bad(fmt::format_string<Args...> f, Args&&... args) {
    if (error_.empty()) error_ = fmt::format(f, std::forward<Args>(args)...);
    return false;
  }

  // Places a scalar into the current container (or as the root).
  bool value(json v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return true;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      top[key_] = std::move(v);
    } else {
      top.push_back(std::move(v));
    }
    return true;
  }

  // Places a container and descends into it.
  bool open(json v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      stack_.push_back(&out_.doc);
      return true;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      stack_.push_back(&slot);
    } else {
      top.push_back(std::move(v));
      stack_.push_back(&top.back());
    }
    return true;
  }

  bool vocab_entry(int64_t id) {
    if (id < 0 || id > kMaxVocabId) return bad("vocab id {} of {:?} is out of range", id, key_);
    out_.vocab.add(key_, static_cast<int32_t>(id));
    return true;
  }

  bool merge_string(const std::string& s) {
    const auto offset = static_cast<uint32_t>(out_.merge_text.size());
    if (depth_ == 4) {  // one side of an [a, b] pair
      if (pair_parts_ >= 2) return bad("merge {} has more than two parts", out_.merges.size());
      out_.merge_text += s;
      if (pair_parts_++ == 0) {
        pending_.left_offset = offset;
        pending_.left_len = static_cast<uint32_t>(s.size());
      } else {
        pending_.right_offset = offset;
        pending_.right_len = static_cast<uint32_t>(s.size());
      }
      return true;
    }
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return bad("merge {} ({:?}) is not two tokens separated by one space", out_.merges.size(), s);
    }
    out_.merge_text += s;
    out_.merges.push_back(MergeRef{offset, static_cast<uint32_t>(space), static_cast<uint32_t>(offset + space + 1),
                                   static_cast<uint32_t>(s.size() - space - 1)});
    return true;
  }

  TokenizerJson& out_;
  std::vector<json*> stack_;
  std::string key_;
  std::string path_[2];
  int depth_ = 0;
  Mode mode_ = Mode::kDom;
  int pair_parts_ = 0;
  MergeRef pending_{};
  std::string error_;
};

}  // namespace

TokenizerJson read_tokenizer_json(std::string_view text) {
  TokenizerJson out;
  out.vocab.reserve(1 << 18, text.size() / 4);
  out.merge_text.reserve(text.size() / 4);
  Handler handler(out);
  const bool ok = json::sax_parse(text.begin(), text.end(), &handler);
  if (!ok) {
    fail(ErrorCode::kCorruptData, "tokenizer.json: {}",
         handler.error().empty() ? std::string("invalid JSON") : handler.error());
  }
  out.vocab.build_index();
  return out;
}

}  // namespace hyllm::tokenizer_detail
