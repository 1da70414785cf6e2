// The official OpenAI Node client (openai 6.x, pinned in package-lock.json)
// with tools against `synapse serve` on a model with a Jinja chat template
// (tests/server/tools_test.py starts it: tiny-qwen3 and Qwen3's template).
// tool_choice "required" and a named function, plain and through the SDK's
// stream helper (chat.completions.stream: its accumulated final completion
// equals the plain reply); the client's tool loop to a final answer (by hand,
// and with chat.completions.runTools). Arguments are checked against the
// tools' schemas by hand (the schemas are small: an enum, bounded strings
// and integers). Usage: node tools.mjs BASE_URL
// Exits non-zero (with the failed check on stderr) when anything differs.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The current weather in a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
        required: ["city", "unit"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_time",
      description: "The time in a time zone.",
      parameters: {
        type: "object",
        properties: { zone: { type: "string", maxLength: 8 }, offset: { type: "integer", minimum: -12, maximum: 14 } },
        required: ["zone", "offset"],
        additionalProperties: false,
      },
    },
  },
];

function checkArguments(name, text) {
  const args = JSON.parse(text);
  if (name === "get_weather") {
    assert.deepEqual(Object.keys(args).sort(), ["city", "unit"]);
    assert.equal(typeof args.city, "string");
    assert.ok([...args.city].length <= 12, args.city);
    assert.ok(["celsius", "fahrenheit"].includes(args.unit), args.unit);
  } else {
    assert.equal(name, "get_time");
    assert.deepEqual(Object.keys(args).sort(), ["offset", "zone"]);
    assert.ok([...args.zone].length <= 8, args.zone);
    assert.ok(Number.isInteger(args.offset) && args.offset >= -12 && args.offset <= 14, String(args.offset));
  }
  return args;
}

function checkCalls(choice, names) {
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  assert.ok(choice.message.tool_calls.length >= 1);
  for (const call of choice.message.tool_calls) {
    assert.equal(call.type, "function");
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.ok(names.includes(call.function.name), call.function.name);
    checkArguments(call.function.name, call.function.arguments);
  }
  return choice.message.tool_calls;
}

const models = await client.models.list();
const model = models.data[0].id;
const user = { role: "user", content: "What is the weather in Paris, and the time there?" };
const base = { model, messages: [user], tools, max_tokens: 300, temperature: 0, seed: 42 };

// "required" and a named function, plain.
const required = await client.chat.completions.create({ ...base, tool_choice: "required" });
checkCalls(required.choices[0], ["get_weather", "get_time"]);
const namedChoice = { type: "function", function: { name: "get_time" } };
const named = await client.chat.completions.create({ ...base, tool_choice: namedChoice, parallel_tool_calls: false });
assert.equal(checkCalls(named.choices[0], ["get_time"]).length, 1);

// The same requests through the stream helper: argument deltas arrive, and
// the accumulated completion is the plain one.
for (const [args, plain] of [[{ ...base, tool_choice: "required" }, required],
                             [{ ...base, tool_choice: namedChoice, parallel_tool_calls: false }, named]]) {
  const stream = client.chat.completions.stream(args);
  let deltas = 0;
  const done = [];
  stream.on("tool_calls.function.arguments.delta", () => ++deltas);
  stream.on("tool_calls.function.arguments.done", (e) => done.push(e.name));
  const final = await stream.finalChatCompletion();
  const streamed = final.choices[0];
  assert.ok(deltas >= 1);
  assert.deepEqual(done, plain.choices[0].message.tool_calls.map((c) => c.function.name));
  assert.equal(streamed.finish_reason, "tool_calls");
  assert.equal(streamed.message.content, null);
  assert.deepEqual(
    streamed.message.tool_calls.map((c) => ({ id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments })),
    plain.choices[0].message.tool_calls.map((c) => ({ id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments })));
}

// The tool loop by hand: call -> the tool's result -> a final answer.
const call = named.choices[0].message.tool_calls[0];
const messages = [user, named.choices[0].message,
                  { role: "tool", tool_call_id: call.id, content: JSON.stringify({ time: "12:00" }) }];
const answer = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", max_tokens: 16, seed: 1 });
assert.ok(["stop", "length"].includes(answer.choices[0].finish_reason));
assert.equal(typeof answer.choices[0].message.content, "string");
assert.equal(answer.choices[0].message.tool_calls, undefined);

// The SDK's own loop (runTools): a named function is called once with the
// arguments the server returned; then, from the tool's result, the loop ends
// with the model's answer (tool_choice auto: this model writes no call by itself).
const runnable = tools.map((t) => ({
  type: "function",
  function: { ...t.function, parse: JSON.parse,
              function: (args) => ({ ok: true, echoed: Object.keys(args).length }) },
}));
const runner = client.chat.completions.runTools({ ...base, tools: runnable, tool_choice: namedChoice });
const called = await runner.finalFunctionToolCall();
assert.equal(called.name, "get_time");
checkArguments(called.name, called.arguments);
assert.deepEqual(JSON.parse(await runner.finalFunctionToolCallResult()), { ok: true, echoed: 2 });
// The runner refuses a reply cut by max_tokens: the end-of-turn token is
// favoured (llama-server's /tokenize gives its id) so that the answer ends by itself.
const root = baseURL.replace(/\/v1\/?$/, "");
const endOfTurn = (await (await fetch(root + "/tokenize", {
  method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ content: "<|im_end|>" }),
})).json()).tokens;
assert.equal(endOfTurn.length, 1);
const loop = client.chat.completions.runTools({ model, messages, tools: runnable, max_tokens: 200, seed: 2,
                                                logit_bias: { [endOfTurn[0]]: 8 } });
const final = await loop.finalContent();
assert.equal(typeof final, "string");
assert.equal((await loop.finalChatCompletion()).choices[0].finish_reason, "stop");
assert.equal((await loop.totalUsage()).prompt_tokens > 0, true);

// Errors surface as the client's typed exceptions, naming the field.
await assert.rejects(client.chat.completions.create({ ...base, tool_choice: { type: "function", function: { name: "nope" } } }),
  (e) => e instanceof OpenAI.BadRequestError && /tool_choice/.test(e.message));
await assert.rejects(client.chat.completions.create({ ...base, tools: [{ type: "function", function: { name: "bad name" } }] }),
  (e) => e instanceof OpenAI.BadRequestError && /tools\[0\]\.function\.name/.test(e.message));
console.log("openai client tools: ok (" + model + ")");
