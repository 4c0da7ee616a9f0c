// The GDN causal depthwise conv1d with conv state.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_seq.h"

namespace hyllm {

void CpuKernels::gdn_conv(const GdnConvArgs& a) {
  const int64_t T = a.out.dim(0), C = a.weight.dim(0), K = a.weight.dim(-1), H = K - 1;
  const int64_t S = a.state_indices.dim(0);
  cpu::check_sequences("gdn_conv", a.query_start_loc, a.state_indices, T, a.conv_state.dim(0));
  const int32_t* qsl = a.query_start_loc.data_as<const int32_t>();
  const int32_t* idx = a.state_indices.data_as<const int32_t>();
  const int32_t* init = a.has_initial_state.data_as<const int32_t>();
  const uint16_t* w = a.weight.data_as<const uint16_t>();
  uint16_t* state = a.conv_state.data_as<uint16_t>();
  uint16_t* out = a.out.data_as<uint16_t>();
  uint16_t* spec = a.spec_states.empty() ? nullptr : a.spec_states.data_as<uint16_t>();
  const int64_t K_spec = spec ? a.spec_states.dim(1) : 0;
  const std::vector<cpu::SeqSave> saves =
      cpu::check_saves("gdn_conv", a.save, a.query_start_loc, a.state_indices, a.conv_state.dim(0));
  // Each task owns a range of channels for all sequences: state writes are disjoint.
  cpu::parallel(C, 64, [&](int64_t c0, int64_t c1) {
    const int64_t nc = c1 - c0;
    std::vector<float> wf(static_cast<size_t>(nc * K));
    for (int64_t c = 0; c < nc; ++c) {
      for (int64_t j = 0; j < K; ++j) wf[c * K + j] = cpu::bf(w[(c0 + c) * K + j]);
    }
    std::vector<uint16_t> ext;  // [H + n, nc]: history rows then the new rows
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t0 = qsl[s], n = qsl[s + 1] - t0;
      if (n == 0) continue;
      uint16_t* st = state + int64_t{idx[s]} * H * C;
      ext.assign(static_cast<size_t>((H + n) * nc), 0);
      if (init[s] != 0) {
        for (int64_t r = 0; r < H; ++r) std::copy(st + r * C + c0, st + r * C + c1, ext.data() + r * nc);
      }
      for (int64_t t = 0; t < n; ++t) {
        const uint16_t* xr = cpu::row(a.x, t0 + t);
        std::copy(xr + c0, xr + c1, ext.data() + (H + t) * nc);
      }
      for (int64_t t = 0; t < n; ++t) {
        uint16_t* o = out + (t0 + t) * C + c0;
        for (int64_t c = 0; c < nc; ++c) {
          float acc = 0.0f;
          for (int64_t j = 0; j < K; ++j) acc += wf[c * K + j] * cpu::bf(ext[(t + j) * nc + c]);
          o[c] = cpu::to_bf(cpu::silu(acc));
        }
      }
      // The conv state after the first `after` tokens is rows [after, after + H)
      // of history + new inputs; dst is a state slot's [H, C] rows.
      auto window = [&](int64_t after, uint16_t* dst) {
        for (int64_t r = 0; r < H; ++r) {
          std::copy(ext.data() + (after + r) * nc, ext.data() + (after + r + 1) * nc, dst + r * C + c0);
        }
      };
      for (int64_t j = 0; n <= K_spec + 1 && j < n - 1; ++j) {
        window(j + 1, spec + (int64_t{idx[s]} * K_spec + j) * H * C);  // after each verified token but the last
      }
      if (const cpu::SeqSave& sv = saves[static_cast<size_t>(s)]; sv.slot >= 0) {
        window(sv.len, state + int64_t{sv.slot} * H * C);  // a prefix-cache save
      }
      window(n, st);  // the new state: the last H rows
    }
  });
}

}  // namespace hyllm
