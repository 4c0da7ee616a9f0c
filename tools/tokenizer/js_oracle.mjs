// Independent oracle: encodes the corpus with transformers.js's tokenizer
// (@lenml/tokenizers) to cross-check the HF goldens. It has no
// split_special_tokens option, so only the default mode is compared.
//
// usage: node js_oracle.mjs TOKENIZER_JSON TOKENIZER_CONFIG_JSON CORPUS_JSONL_XZ OUT_JSONL [GOLDEN_JSON_XZ]
// With a golden file (from hf_goldens.py) it also reports how many documents
// agree with HF tokenizers and names those that do not.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";

const [tokenizerPath, configPath, corpusPath, outPath, goldenPath] = process.argv.slice(2);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(tokenizerPath, "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(configPath, "utf8")),
});
const corpus = execFileSync("xz", ["-dc", corpusPath], { maxBuffer: 1 << 30 }).toString("utf8");
const lines = [];
const docs = [];
for (const line of corpus.split("\n")) {
  if (!line) continue;
  const doc = JSON.parse(line);
  const ids = tokenizer.encode(doc.text, { add_special_tokens: false });
  docs.push({ name: doc.name, ids });
  lines.push(JSON.stringify({ name: doc.name, ids }));
}
writeFileSync(outPath, lines.join("\n") + "\n");
console.error(`${lines.length} documents encoded`);
if (goldenPath) {
  const golden = JSON.parse(execFileSync("xz", ["-dc", goldenPath], { maxBuffer: 1 << 30 }).toString("utf8"));
  let compared = 0;
  const differ = [];
  for (const c of golden.cases) {
    if (c.add_special || c.split_special) continue;
    compared++;
    const ours = docs[c.doc].ids;
    if (ours.length !== c.ids.length || ours.some((v, i) => v !== c.ids[i])) differ.push(docs[c.doc].name);
  }
  console.log(`transformers.js vs HF tokenizers ${golden.hf_tokenizers_version}: ${compared - differ.length} of ${compared} documents agree` +
              (differ.length ? `; differ: ${differ.slice(0, 20).join(", ")}` : ""));
}
