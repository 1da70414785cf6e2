// The official OpenAI Node client (openai 6.x, pinned in package-lock.json)
// against `synapse serve --embeddings`: embeddings.create with a list of
// inputs (the SDK asks for base64 and decodes the float32 bytes) and each
// input alone; both must be the same vectors, L2-normalised, and the same as
// encoding_format "float". Usage: node embeddings.mjs BASE_URL INPUT...
// Prints {"embeddings": [[...], ...], "usage": {...}} on success; exits
// non-zero (the failed check on stderr) when anything differs.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, ...inputs] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0].id;

const batched = await client.embeddings.create({ model, input: inputs });
assert.equal(batched.object, "list");
assert.equal(batched.data.length, inputs.length);
const floats = await client.embeddings.create({ model, input: inputs, encoding_format: "float" });
for (let i = 0; i < inputs.length; i++) {
  const e = batched.data[i];
  assert.equal(e.object, "embedding");
  assert.equal(e.index, i);
  const norm = Math.sqrt(e.embedding.reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5, `input ${i}: norm ${norm}`);
  assert.deepEqual(floats.data[i].embedding, e.embedding, `input ${i}: float and base64 differ`);
  const alone = await client.embeddings.create({ model, input: inputs[i] });
  assert.deepEqual(alone.data[0].embedding, e.embedding, `input ${i}: alone and batched differ`);
}
assert.ok(batched.usage.prompt_tokens > 0 && batched.usage.total_tokens === batched.usage.prompt_tokens);
console.log(JSON.stringify({ embeddings: batched.data.map((d) => d.embedding), usage: batched.usage }));
