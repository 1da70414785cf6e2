// The official Ollama JavaScript client (ollama 0.6.x, pinned in
// package-lock.json) against a running `synapse serve`'s Ollama API: version,
// list, show, ps, a chat and a generation whole and streamed (the streams add
// up to the whole replies), and a wrong model's 404 as the client reports it.
// Usage: node client.mjs HOST (http://127.0.0.1:PORT)
// Exits non-zero (with the failed check on stderr) when anything differs.
import { Ollama } from "ollama";
import assert from "node:assert/strict";

const [host] = process.argv.slice(2);
const ollama = new Ollama({ host });

const { version } = await ollama.version();
assert.match(version, /^\d+\.\d+\.\d+$/);

const { models } = await ollama.list();
assert.equal(models.length, 1);
const model = models[0].name;
assert.equal(models[0].details.format, "gguf");

const show = await ollama.show({ model });
assert.ok(show.capabilities.includes("completion"));
const arch = show.model_info["general.architecture"];
assert.ok(show.model_info[`${arch}.context_length`] > 0, "no context_length in model_info");

const { models: running } = await ollama.ps();
assert.equal(running[0].name, model);

const options = { temperature: 0, seed: 42, num_predict: 32 };
const messages = [{ role: "system", content: "You tell stories." }, { role: "user", content: "A story about a dog." }];
const whole = await ollama.chat({ model, messages, options });
assert.equal(whole.done, true);
assert.ok(whole.message.content.length > 0, "empty chat reply");
let text = "";
let last;
for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
  text += part.message.content;
  last = part;
}
assert.equal(text, whole.message.content);
assert.equal(last.done, true);
assert.equal(last.done_reason, whole.done_reason);
assert.equal(last.eval_count, whole.eval_count);
assert.equal(last.prompt_eval_count, whole.prompt_eval_count);

const generated = await ollama.generate({ model, prompt: "Once upon a time", raw: true, options });
let streamed = "";
for await (const part of await ollama.generate({ model, prompt: "Once upon a time", raw: true, options, stream: true }))
  streamed += part.response;
assert.equal(streamed, generated.response);
assert.ok(generated.eval_count > 0);

await assert.rejects(ollama.chat({ model: "no-such-model", messages }), (e) => {
  assert.equal(e.status_code, 404);
  assert.equal(e.error, "model 'no-such-model' not found");
  return true;
});

console.log("ollama client: ok");
