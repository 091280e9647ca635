// Usage: node read_relayed.js URL STREAM EXPECTED_FILE
//
// Reads every message of JetStream stream STREAM on the NATS server at URL
// (sequence 1 to the stream's last) with the official NATS client, and
// decodes each with the official CloudEvents SDK in binary mode
// (HTTP.toEvent). EXPECTED_FILE holds one JSON object per line, matched to
// a message by id (and each source and subject's lines in their order):
// id, source, type, subject, time, datacontenttype (optional),
// subjectversion (optional), subjectseq and seqorigin (extensions), and
// data_base64 (the exact body). For each message it checks that id, source,
// type, subject, datacontenttype, subjectversion, subjectseq and seqorigin
// come out as exactly the expected strings, and that the SDK finds the
// event valid (validate(): the source a uri-reference...); traceparent, correlationid and
// causationid too when a line has them; that the time is the same instant;
// that Nats-Msg-Id is the id; and that the body is data_base64 byte for byte.
// The number of messages must be the number of lines. It also checks what
// the binding asks of the sender: every ce-* value printable ASCII with no
// space or '"', and every ce-* header sent once.
//
// The SDK does not percent-decode (cloudevents 10.0.0,
// dist/message/http/index.js, parseBinary: line 162 passes each known
// ce-* header through a PassThroughParser, line 169-170 copies extension
// headers verbatim), though the NATS binding (section 3.1.3.2) says a
// receiver MUST. So this script decodes every ce-* value before the SDK
// sees it: %XX escapes become bytes, which must be UTF-8. A malformed
// escape or bad UTF-8 fails the check (so does a quoted-string, which the
// binding lets older senders use, as not percent-encoded). It lowercases
// header names (case-insensitive in NATS) because the SDK finds extension
// headers by a case-sensitive "ce-" prefix (line 169) and silently drops
// a "Ce-Seqorigin". And as the SDK keeps the time only to the millisecond
// (and turns a time it cannot parse into the time now: dist/parsers.js
// line 81-84), the ce-time header is also compared exactly by this script.
//
// Prints one summary line; exits 1 on the first failure.
"use strict";
const fs = require("fs");
const { connect, Match } = require("nats");
const { HTTP } = require("cloudevents");

function fail(where, why) {
  console.error(`${where}: ${why}`);
  process.exit(1);
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

// One round of percent-decoding (hex digits in either case) of a value
// that properlyEncoded() accepted, so all ASCII; the bytes must be UTF-8.
function percentDecode(value) {
  const bytes = [];
  for (let i = 0; i < value.length; i++) {
    if (value[i] !== "%") {
      bytes.push(value.charCodeAt(i));
      continue;
    }
    const hex = value.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw new Error(`malformed percent escape at ${i} in ${JSON.stringify(value)}`);
    bytes.push(parseInt(hex, 16));
    i += 2;
  }
  try {
    return utf8.decode(Uint8Array.from(bytes));
  } catch (e) {
    throw new Error(`${JSON.stringify(value)} decodes to bytes that are not UTF-8`);
  }
}

// What the binding asks of an encoder: printable ASCII, no space, no '"'.
function properlyEncoded(value) {
  return /^[\x21\x23-\x7e]*$/.test(value);
}

// The NATS headers as a plain object for the SDK: lowercased name -> first
// value, ce-* values percent-decoded. Returns [object, number decoded].
function sdkHeaders(where, natsHeaders) {
  const out = {};
  let decoded = 0;
  for (const [name, values] of natsHeaders) {
    const key = name.toLowerCase();
    if (!key.startsWith("ce-")) {
      if (!(key in out)) out[key] = values[0];
      continue;
    }
    if (key in out || values.length !== 1) fail(where, `header ${name} sent more than once`);
    if (!properlyEncoded(values[0])) fail(where, `header ${name} is not percent-encoded: ${JSON.stringify(values[0])}`);
    try {
      out[key] = percentDecode(values[0]);
    } catch (e) {
      fail(where, `header ${name}: ${e.message}`);
    }
    if (out[key] !== values[0]) decoded++;
  }
  return [out, decoded];
}

// An RFC 3339 time as [whole seconds since the epoch, nanoseconds], exact.
function instant(where, text) {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/.exec(text);
  if (!m) fail(where, `not an RFC 3339 time: ${JSON.stringify(text)}`);
  const ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  let seconds = BigInt(ms / 1000);
  if (!m[8]) seconds -= BigInt((m[9] === "-" ? -1 : 1) * (+m[10] * 3600 + +m[11] * 60));
  return [seconds, Number((m[7] || "").padEnd(9, "0"))];
}

function sameInstant(where, a, b) {
  const [x, y] = [instant(where, a), instant(where, b)];
  return x[0] === y[0] && x[1] === y[1];
}

// Bytes of data as the SDK hands it back: a typed array, a string or JSON.
function bytesOf(data) {
  if (data === undefined) return Buffer.alloc(0);
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (typeof data === "string") return Buffer.from(data, "utf8");
  return Buffer.from(JSON.stringify(data), "utf8");
}

const STRING_ATTRS = ["id", "source", "type", "subject", "datacontenttype", "subjectversion", "subjectseq", "seqorigin"];
const OPTIONAL_ATTRS = ["traceparent", "correlationid", "causationid"];

function checkOne(where, stored, expected) {
  const [headers, decoded] = sdkHeaders(where, stored.header);
  const body = Buffer.from(stored.data);
  let event;
  try {
    event = HTTP.toEvent({ headers, body });
  } catch (e) {
    fail(where, `the SDK does not decode it: ${e.message}`);
  }
  if (Array.isArray(event)) fail(where, "the SDK decoded a batch, not one event");
  try {
    event.validate();  // toEvent does not: the source a uri-reference, and so on
  } catch (e) {
    fail(where, `the SDK finds it invalid: ${e.message} ${JSON.stringify(e.errors || [])}`);
  }
  if (event.specversion !== "1.0") fail(where, `specversion ${JSON.stringify(event.specversion)} != "1.0"`);
  const attrs = STRING_ATTRS.concat(OPTIONAL_ATTRS.filter((a) => expected[a] !== undefined));
  for (const attr of attrs) {
    const want = expected[attr] === null ? undefined : expected[attr];
    if (event[attr] !== want) fail(where, `${attr} ${JSON.stringify(event[attr])} != ${JSON.stringify(want)}`);
  }
  if (headers["ce-time"] === undefined) fail(where, "no ce-time header");
  if (!sameInstant(where, headers["ce-time"], expected.time)) fail(where, `ce-time ${headers["ce-time"]} != ${expected.time}`);
  if (event.time !== new Date(expected.time).toISOString()) fail(where, `SDK time ${event.time} != ${expected.time}`);
  const msgId = stored.header.get("Nats-Msg-Id", Match.IgnoreCase);
  if (msgId !== expected.id) fail(where, `Nats-Msg-Id ${JSON.stringify(msgId)} != id ${JSON.stringify(expected.id)}`);
  const want = Buffer.from(expected.data_base64 || "", "base64");
  if (!body.equals(want)) fail(where, `body ${body.toString("base64")} != data_base64 ${want.toString("base64")}`);
  if (!bytesOf(event.data).equals(want)) fail(where, `the SDK's data is not the body: ${JSON.stringify(event.data)}`);
  return decoded;
}

async function main() {
  const [url, stream, expectedFile] = process.argv.slice(2);
  if (!expectedFile) fail("usage", "read_relayed.js URL STREAM EXPECTED_FILE");
  const lines = fs.readFileSync(expectedFile, "utf8").split("\n").filter((l) => l.length > 0);
  const expected = lines.map((l, i) => {
    try {
      return JSON.parse(l);
    } catch (e) {
      return fail(`${expectedFile} line ${i + 1}`, e.message);
    }
  });
  if (expected.length === 0) fail(expectedFile, "no expected events");
  let nc;
  try {
    nc = await connect({ servers: url });
  } catch (e) {
    fail(url, `cannot connect: ${e.message}`);
  }
  const jsm = await nc.jetstreamManager();
  let state;
  try {
    state = (await jsm.streams.info(stream)).state;
  } catch (e) {
    fail(`stream ${stream}`, e.message);
  }
  if (state.messages !== expected.length) fail(`stream ${stream}`, `holds ${state.messages} messages, expected ${expected.length}`);
  // Relays keep each subject's order, not one order across subjects: a
  // message is matched to its line by id, and each source and subject's
  // positions must rise in stream order.
  const byId = new Map(expected.map((e) => [e.id, e]));
  const lastPosition = new Map();
  let decoded = 0;
  for (let seq = 1; seq <= state.last_seq; seq++) {
    const where = `stream ${stream} seq ${seq}`;
    let stored;
    try {
      stored = await jsm.streams.getMessage(stream, { seq });
    } catch (e) {
      fail(where, `cannot read it: ${e.message}`);
    }
    const id = stored.header.get("Nats-Msg-Id", Match.IgnoreCase);
    const line = byId.get(id);
    if (line === undefined) fail(where, `id ${JSON.stringify(id)} is not expected, or came twice`);
    byId.delete(id);
    decoded += checkOne(where, stored, line);
    const key = JSON.stringify([line.source, line.subject]);
    const position = BigInt(line.subjectseq);
    if (lastPosition.has(key) && lastPosition.get(key) >= position) fail(where, `out of order on ${key}`);
    lastPosition.set(key, position);
  }
  await nc.close();
  console.log(`${expected.length} relayed events decoded by the CloudEvents SDK, every attribute as sent (${decoded} header values percent-decoded)`);
}

main().catch((e) => fail("read_relayed", e.stack || e.message));
