#include "text/tokenizer/post_processor.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "text/tokenizer/json_util.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

// TemplateProcessing's "single" template flattened: runs of special ids with
// the sequence's place marked by a flag.
class TemplateProcessor final : public PostProcessor {
 public:
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  explicit TemplateProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 8);
    for (const auto& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    ids.swap(out);
  }
  int32_t largest_id() const override {
    int32_t largest = -1;
    for (const auto& item : items_) {
      for (int32_t id : item.ids) largest = std::max(largest, id);
    }
    return largest;
  }

 private:
  std::vector<Item> items_;
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->process(ids);
  }
  int32_t largest_id() const override {
    int32_t largest = -1;
    for (const auto& p : parts_) largest = std::max(largest, p->largest_id());
    return largest;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// ByteLevel only trims offsets: nothing to do for ids.
class NoOpProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
  int32_t largest_id() const override { return -1; }
};

int32_t parse_id(const nlohmann::json& j, std::string_view what) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > INT32_MAX) {
    fail(ErrorCode::kCorruptData, "tokenizer.json: {} has a bad token id", what);
  }
  return static_cast<int32_t>(j.get<int64_t>());
}

std::unique_ptr<PostProcessor> parse_template(const nlohmann::json& j) {
  const auto& single = json_field(j, "single", "TemplateProcessing");
  const auto& specials = json_field(j, "special_tokens", "TemplateProcessing");
  if (!single.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: TemplateProcessing.single is not a list");
  std::vector<TemplateProcessor::Item> items;
  for (const auto& piece : single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      items.push_back({true, {}});
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      const std::string name = json_string(piece["SpecialToken"], "id", "TemplateProcessing SpecialToken");
      if (!specials.is_object() || !specials.contains(name)) {
        fail(ErrorCode::kCorruptData, "tokenizer.json: template special token {:?} is not in special_tokens", name);
      }
      const auto& ids_json = json_field(specials[name], "ids", "TemplateProcessing special token");
      if (!ids_json.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: special token {:?} ids is not a list", name);
      std::vector<int32_t> ids;
      for (const auto& id : ids_json) ids.push_back(parse_id(id, "TemplateProcessing"));
      items.push_back({false, std::move(ids)});
    } else {
      fail(ErrorCode::kCorruptData, "tokenizer.json: TemplateProcessing piece {} is not understood",
           piece.dump().substr(0, 100));
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(items));
}

// RobertaProcessing and BertProcessing: cls + sequence + sep.
std::unique_ptr<PostProcessor> parse_cls_sep(const nlohmann::json& j, std::string_view type) {
  auto pair_id = [&](const char* key) {
    const auto& v = json_field(j, key, type);
    if (!v.is_array() || v.size() != 2) fail(ErrorCode::kCorruptData, "tokenizer.json: {}.{} is not [token, id]", type, key);
    return parse_id(v[1], type);
  };
  std::vector<TemplateProcessor::Item> items;
  items.push_back({false, {pair_id("cls")}});
  items.push_back({true, {}});
  items.push_back({false, {pair_id("sep")}});
  return std::make_unique<TemplateProcessor>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "post_processor");
  if (type == "TemplateProcessing") return parse_template(j);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "RobertaProcessing" || type == "BertProcessing") return parse_cls_sep(j, type);
  if (type == "Sequence") {
    const auto& list = json_field(j, "processors", "Sequence post_processor");
    if (!list.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: Sequence processors is not a list");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& item : list) {
      auto p = parse_post_processor(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: post_processor type {:?} is not supported", type);
}

}  // namespace hyllm::tokenizer_detail
