// Second oracle for the chat-template goldens: renders jobs with
// @huggingface/jinja. Reads [{source, context}] as JSON on stdin and writes
// [{output} | {error}] in the same order on stdout. make_goldens.py drives it.
import { Template } from "@huggingface/jinja";

// strftime_now must see the same fixed instant as the jinja2 oracle
// (FIXED_TIME seconds, run with TZ=UTC).
const fixedMs = Number(process.env.FIXED_TIME) * 1000;
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixedMs);
    else super(...args);
  }
  static now() {
    return fixedMs;
  }
};

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const results = jobs.map(({ source, context }) => {
  try {
    // @huggingface/jinja provides raise_exception and strftime_now itself.
    return { output: new Template(source).render(context) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(results));
