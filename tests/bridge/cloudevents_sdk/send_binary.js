// Usage: node send_binary.js URL NATS_SUBJECT OUT_FILE
//
// Makes five CloudEvents with the official CloudEvents SDK, encodes each in
// binary mode with HTTP.binary and publishes it with the official NATS
// client to NATS_SUBJECT through JetStream (the caller creates a stream
// that captures NATS_SUBJECT beforehand), the headers being exactly the
// names and values the SDK produced, plus the Nats-Msg-Id the client adds
// for msgID. The SDK percent-encodes nothing (cloudevents 10.0.0,
// dist/message/http/headers.js, headersFor: each value is copied as it is)
// and neither does this script. The events are:
//   a. no subject (and no datacontenttype: the SDK still sends
//      content-type "application/json; charset=utf-8", its default)
//   b. a subject, with the names ce-subject and ce-specversion renamed to
//      Ce-Subject and Ce-Specversion (header names are case-insensitive)
//   c. JSON data, datacontenttype application/json, which the SDK sends as
//      content-type, not ce-datacontenttype
//   d. text data, datacontenttype "text/plain; charset=utf-8"
//   e. binary data, bytes 0..255, datacontenttype application/octet-stream
// OUT_FILE gets one JSON object per event, in publish order: id, source,
// type, subject (null when none), time, datacontenttype (as a receiver
// should see it: the content-type header), data_base64 (the body as
// sent) and header_names (the header names sent, Nats-Msg-Id included).
//
// Prints one summary line; exits 1 on the first failure (e.g. no stream).
"use strict";
const fs = require("fs");
const { connect, headers } = require("nats");
const { CloudEvent, HTTP } = require("cloudevents");

function fail(where, why) {
  console.error(`${where}: ${why}`);
  process.exit(1);
}

// Each event, with the header names to send in another case.
function events() {
  return [
    {
      what: "a (no subject)",
      event: new CloudEvent({ source: "https://cloud.example/fleet", type: "cloud.host-registered.v1",
                              data: { host: "web-7", zone: "eu-west-1" } }),
    },
    {
      what: "b (mixed-case names)",
      rename: { "ce-subject": "Ce-Subject", "ce-specversion": "Ce-Specversion" },
      event: new CloudEvent({ source: "urn:cloud:ops", type: "cloud.config-changed.v1", subject: "hosts/web-7",
                              datacontenttype: "text/plain", data: "restart scheduled" }),
    },
    {
      what: "c (JSON data)",
      event: new CloudEvent({ source: "https://cloud.example/fleet", type: "cloud.alert-raised.v2", subject: "alerts/disk",
                              datacontenttype: "application/json", data: { level: "warn", used: 0.93, tags: ["disk", "web-7"] } }),
    },
    {
      what: "d (text data)",
      event: new CloudEvent({ source: "urn:cloud:ops", type: "cloud.log-line.v1", subject: "logs/web-7",
                              datacontenttype: "text/plain; charset=utf-8", data: "disk at 93% on web-7, café ok" }),
    },
    {
      what: "e (binary data)",
      event: new CloudEvent({ source: "https://cloud.example/fleet", type: "cloud.firmware-chunk.v1", subject: "firmware/web-7",
                              datacontenttype: "application/octet-stream", data: Uint8Array.from({ length: 256 }, (_, i) => i) }),
    },
  ];
}

// The body HTTP.binary produced, as bytes.
function bodyBytes(body) {
  if (body === undefined) return Buffer.alloc(0);
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new Error(`unexpected body from HTTP.binary: ${typeof body}`);
}

// The SDK's headers as NATS headers, the names in `rename` sent in another case.
function natsHeaders(what, sdk, rename) {
  const h = headers();
  for (const [name, value] of Object.entries(sdk)) {
    const text = String(value);
    if (text !== text.trim()) fail(what, `the NATS client would trim header ${name}: ${JSON.stringify(text)}`);
    try {
      h.append((rename || {})[name] || name, text);
    } catch (e) {
      fail(what, `the NATS client refuses header ${name}: ${e.message}`);
    }
  }
  return h;
}

async function main() {
  const [url, subject, outFile] = process.argv.slice(2);
  if (!outFile) fail("usage", "send_binary.js URL NATS_SUBJECT OUT_FILE");
  let nc;
  try {
    nc = await connect({ servers: url });
  } catch (e) {
    fail(url, `cannot connect: ${e.message}`);
  }
  const js = nc.jetstream();
  const lines = [];
  const seqs = [];
  let stream = "";
  for (const { what, event, rename } of events()) {
    const message = HTTP.binary(event);
    const body = bodyBytes(message.body);
    const h = natsHeaders(what, message.headers, rename);
    let ack;
    try {
      ack = await js.publish(subject, body, { headers: h, msgID: event.id });
    } catch (e) {
      const why = e.code === "503" ? "no responders (does a stream capture it?)" : e.message;
      fail(`event ${what}`, `publish to ${subject} failed: ${why}`);
    }
    if (ack.duplicate) fail(`event ${what}`, `JetStream took id ${event.id} for a duplicate`);
    stream = ack.stream;
    seqs.push(ack.seq);
    lines.push(JSON.stringify({
      id: event.id,
      source: event.source,
      type: event.type,
      subject: event.subject === undefined ? null : event.subject,
      time: message.headers["ce-time"],
      datacontenttype: message.headers["content-type"],
      data_base64: body.toString("base64"),
      header_names: h.keys(),
    }));
  }
  await nc.close();
  fs.writeFileSync(outFile, lines.join("\n") + "\n");
  console.log(`${lines.length} CloudEvents encoded by the SDK in binary mode, published to ${subject} (stream ${stream}, seq ${seqs[0]}..${seqs[seqs.length - 1]})`);
}

main().catch((e) => fail("send_binary", e.stack || e.message));
