#pragma once
// /metrics: the engine's stats as Prometheus text with vLLM's metric names and
// labels (model_name, engine), so that dashboards built for vLLM read hyllm
// unchanged.

#include <string>
#include <string_view>

#include "engine/engine_stats.h"

namespace hyllm::serve {

std::string render_metrics(const EngineStats& stats, std::string_view model_name);

}  // namespace hyllm::serve
