#pragma once
// The engine's view of a request: one Request per EngineRequest, holding one
// Sequence per choice. Before an n > 1 request forks, only choice 0 exists and
// it computes the prompt except its last token; the fork then creates the
// other choices sharing those blocks, and from there every choice runs on its
// own (scheduled, preempted and finished independently).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "engine/kv/block_hash.h"
#include "engine/sampling_params.h"

namespace hyllm {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Request;

struct Sequence {
  Request* request = nullptr;
  int index = 0;                    // choice index
  int64_t seq_id = -1;              // new on every admission (the executor's key)
  std::vector<int32_t> tokens;      // prompt + outputs
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;      // tokens whose KV and state are in the cache
  std::vector<int32_t> block_table; // covers positions [0, num_computed_tokens)
  int32_t state_slot = -1;
  // Prefix caching: the chained hashes of the full blocks of `tokens` seen
  // so far (from the request's root: salted by its cache_salt), and where the cached KV blocks found at admission end when the
  // cached state stops short of it (a chunk ends there to save the state).
  BlockHashChain block_hashes;
  int cached_block_end = 0;
  // Speculative decoding: tokens the MTP head proposed after `tokens`, to be
  // verified by the next step (empty when none; dropped on preemption).
  std::vector<int32_t> draft_tokens;
  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  StopReason stop_reason;
  uint64_t seed = 0;

  // News since this choice's last output.
  std::vector<int32_t> pending_tokens;
  std::vector<TokenLogprob> pending_logprobs;
  std::string pending_text;
  bool pending_finish = false;

  Clock::time_point last_token_time{};

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool finished() const { return status == SeqStatus::kFinished; }
};

struct Request {
  std::string id;
  SamplingParams sampling;
  std::shared_ptr<StopStringHook> stop_hook;
  std::vector<std::unique_ptr<Sequence>> seqs;  // seqs[i]->index == i; size 1 until the fork
  bool forked = true;                           // false until an n > 1 request's choices exist
  std::vector<int32_t> reserved_slots;          // slots held for the fork's new choices
  int num_finished = 0;
  std::string error_message;
  int error_status = 500;  // the HTTP status of the failure: 400 when the request itself was unsatisfiable
  uint64_t base_seed = 0;                       // choice i samples with base_seed + i
  std::vector<int32_t> min_tokens_banned;       // EOS (unless ignore_eos) and stop ids
  std::vector<std::shared_ptr<TokenConstraint>> constraints;  // per choice, or empty
  int num_cached_tokens = 0;                    // prompt tokens served from the prefix cache
  // Prompt logprobs (sampling.prompt_logprobs): entry p is prompt token p + 1
  // given tokens 0..p, written as choice 0's chunks score them, and handed
  // to the request's first output with tokens; then scoring stops (a choice
  // recomputed after preemption does not score again).
  std::vector<TokenLogprob> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  bool admitted_once = false;                   // its prefix lookup is counted

  // Timing for the metrics.
  Clock::time_point arrival_time{};
  Clock::time_point first_scheduled_time{};
  Clock::time_point first_token_time{};
  bool scheduled_once = false;
  bool has_first_token = false;
  bool has_news = false;                        // listed for the next outputs

  int n() const { return sampling.n; }
  TokenConstraint* constraint(int choice) const {
    return constraints.empty() ? nullptr : constraints[static_cast<size_t>(choice)].get();
  }
  int num_prompt_tokens() const { return seqs.front()->num_prompt_tokens; }
  bool scores_prompt() const { return sampling.prompt_logprobs.has_value() && !prompt_logprobs_sent; }
  bool finished() const { return num_finished == n(); }
  // Choice 0 before the fork stops short of the last prompt token.
  bool awaiting_fork() const { return !forked; }
  // Choice 0 computes this many tokens before the fork.
  int fork_point() const { return num_prompt_tokens() - 1; }
};

}  // namespace hyllm
