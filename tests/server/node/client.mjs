// The official OpenAI Node client (openai 6.x, pinned in package-lock.json)
// against a running `synapse serve`: lists models, completes, streams a chat
// with usage, reads logprobs. Usage: node client.mjs BASE_URL API_KEY
// Exits non-zero (with the failed check on stderr) when anything differs.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

const models = await client.models.list();
assert.equal(models.data.length, 1);
const model = models.data[0].id;
assert.ok(model.length > 0);

// A plain completion: the same seed twice gives the same text.
const completionArgs = { model, prompt: "Once upon a time", max_tokens: 24, seed: 5, temperature: 1.0 };
const c1 = await client.completions.create(completionArgs);
const c2 = await client.completions.create(completionArgs);
assert.equal(c1.object, "text_completion");
assert.equal(c1.choices.length, 1);
assert.ok(["stop", "length"].includes(c1.choices[0].finish_reason));
assert.equal(c1.choices[0].text, c2.choices[0].text);
assert.ok(c1.usage.prompt_tokens > 0);
assert.ok(c1.usage.completion_tokens > 0);

// A chat reply with logprobs, then the same request streamed with usage:
// the streamed deltas and logprobs concatenate to the non-streamed reply.
const chatArgs = {
  model,
  messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "A story about a dog." }],
  max_tokens: 24, seed: 11, temperature: 0.8, logprobs: true, top_logprobs: 2,
};
const chat = await client.chat.completions.create(chatArgs);
assert.equal(chat.object, "chat.completion");
const msg = chat.choices[0].message;
assert.equal(msg.role, "assistant");
const lp = chat.choices[0].logprobs.content;
assert.equal(lp.length, chat.usage.completion_tokens);
for (const t of lp) {
  assert.ok(t.logprob <= 0);
  assert.equal(t.top_logprobs.length, 2);
  assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
}

const stream = await client.chat.completions.create({ ...chatArgs, stream: true, stream_options: { include_usage: true } });
let text = "", streamedLp = [], finish = null, usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.delta.content ?? "";
    if (choice.logprobs) streamedLp = streamedLp.concat(choice.logprobs.content);
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(text, msg.content);
assert.deepEqual(streamedLp, lp);
assert.equal(finish, chat.choices[0].finish_reason);
assert.ok(usage !== null, "stream_options.include_usage gave no usage chunk");
assert.equal(usage.completion_tokens, chat.usage.completion_tokens);
assert.equal(usage.prompt_tokens, chat.usage.prompt_tokens);
assert.ok(usage.prompt_tokens_details.cached_tokens > 0, "the repeated prompt was not served from the cache");

// Errors surface as the client's typed exceptions.
await assert.rejects(client.chat.completions.create({ ...chatArgs, temperature: -1 }),
  (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
const wrong = new OpenAI({ baseURL, apiKey: "not-the-key", maxRetries: 0 });
await assert.rejects(wrong.completions.create(completionArgs), (e) => e instanceof OpenAI.AuthenticationError);
console.log("openai client: ok (" + model + ")");
