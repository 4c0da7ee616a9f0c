#include "structured/grammar_constraint.h"

#include <dlpack/dlpack.h>

#include "structured/grammar_compiler_impl.h"

namespace hyllm::structured {
namespace {

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar, const ConstraintOptions& options)
      : grammar_(std::move(grammar)), matcher_(grammar_->grammar), options_(options) {
    if (options_.reasoning_end_token) {
      if (options_.starts_in_reasoning) {
        phase_ = Phase::kReasoning;
      } else if (options_.reasoning_start_token) {
        phase_ = Phase::kMayOpenReasoning;
      }
    }
  }

  bool fill_next_token_bitmask(std::span<uint32_t> bitmask) override {
    if (phase_ == Phase::kReasoning) return false;
    // A finished grammar has nothing left to say: what follows (only with
    // ignore_eos, since it allows nothing but a stop token) is unconstrained.
    if (phase_ == Phase::kAnswer && matcher_.IsTerminated()) return false;
    int64_t shape[1] = {static_cast<int64_t>(bitmask.size())};
    DLTensor t{};
    t.data = bitmask.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = shape;
    matcher_.FillNextTokenBitmask(&t);
    if (phase_ == Phase::kMayOpenReasoning) {
      const auto open = static_cast<uint32_t>(*options_.reasoning_start_token);
      if (open / 32 < bitmask.size()) bitmask[open / 32] |= 1u << (open % 32);
    }
    return true;
  }

  bool accept_token(int32_t token) override {
    switch (phase_) {
      case Phase::kMayOpenReasoning:
        // The first token decides: a reasoning block opens, or the answer starts.
        if (options_.reasoning_start_token && token == *options_.reasoning_start_token) {
          phase_ = Phase::kReasoning;
          return true;
        }
        phase_ = Phase::kAnswer;
        break;
      case Phase::kReasoning:
        if (token == *options_.reasoning_end_token) phase_ = Phase::kAnswer;
        return true;
      case Phase::kAnswer:
        if (matcher_.IsTerminated()) return true;
        break;
    }
    return matcher_.AcceptToken(token);
  }

  std::vector<int32_t> forced_tokens(int max_tokens) override {
    std::vector<int32_t> out;
    if (!options_.jump_forward || phase_ != Phase::kAnswer || max_tokens <= 0 || matcher_.IsTerminated()) return out;
    const std::string forced = matcher_.FindJumpForwardString();
    if (forced.empty()) return out;
    std::vector<int32_t> ids = grammar_->compiler->tokenizer().encode(forced, /*add_special_tokens=*/false);
    if (ids.size() <= 1) return out;
    ids.pop_back();
    for (int32_t id : ids) {
      if (static_cast<int>(out.size()) >= max_tokens || !matcher_.AcceptToken(id)) break;
      out.push_back(id);
    }
    return out;
  }

 private:
  enum class Phase { kMayOpenReasoning, kReasoning, kAnswer };
  std::shared_ptr<const CompiledGrammar> grammar_;
  xgrammar::GrammarMatcher matcher_;
  ConstraintOptions options_;
  Phase phase_ = Phase::kAnswer;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const CompiledGrammar> grammar,
                                                         const ConstraintOptions& options) {
  return std::make_unique<GrammarConstraint>(std::move(grammar), options);
}

}  // namespace hyllm::structured
