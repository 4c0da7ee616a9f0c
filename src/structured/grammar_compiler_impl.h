#pragma once
// The xgrammar types behind GrammarCompiler, shared with grammar_constraint.cpp only.

#include <xgrammar/xgrammar.h>

#include "structured/grammar_compiler.h"

namespace hyllm::structured {

struct CompiledGrammar {
  CompiledGrammar(xgrammar::CompiledGrammar g, const GrammarCompiler* c) : grammar(std::move(g)), compiler(c) {}
  xgrammar::CompiledGrammar grammar;
  const GrammarCompiler* compiler;  // outlives every request (the server owns it)
};

}  // namespace hyllm::structured
