// The official OpenAI Node client (openai 6.x, pinned in package-lock.json)
// against a running `synapse serve`'s Responses API: a response created, the
// same request streamed through responses.stream() (whose accumulator checks
// each event's output_index and content_index), and both against the chat
// route. Usage: node responses.mjs BASE_URL
// Exits non-zero (with the failed check on stderr) when anything differs.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0].id;

const args = {
  model, instructions: "You tell stories.", temperature: 0, max_output_tokens: 40,
  input: [{ role: "user", content: "A story about a dog." }],
};
const created = await client.responses.create(args);
assert.equal(created.object, "response");
assert.ok(["completed", "incomplete"].includes(created.status));
assert.ok(created.output_text.length > 0, "no output_text");  // the SDK's, from output

const chat = await client.chat.completions.create({
  model, temperature: 0, max_tokens: 40,
  messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "A story about a dog." }],
});
assert.equal(created.output_text, chat.choices[0].message.content);
assert.equal(created.usage.input_tokens, chat.usage.prompt_tokens);

const stream = client.responses.stream(args);
let deltas = "", names = [];
stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
stream.on("event", (e) => { names.push(e.type); });
const final = await stream.finalResponse();
assert.equal(deltas, created.output_text);
assert.equal(final.output_text, created.output_text);
assert.equal(final.status, created.status);
assert.equal(final.output.length, created.output.length);
assert.equal(names[0], "response.created");
assert.ok(["response.completed", "response.incomplete"].includes(names[names.length - 1]));

// A raw stream (create with stream: true) numbers its events from 0.
const raw = await client.responses.create({ ...args, stream: true });
let seq = 0;
for await (const event of raw) assert.equal(event.sequence_number, seq++);
assert.ok(seq > 4);

console.log("openai responses: ok");
