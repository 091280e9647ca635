// Reads `walbus export --format cloudevents-json` output (one event per
// line) and checks every event with the official CloudEvents SDK: it must
// validate, and its id, source, type, subject, time, extensions and data
// must survive a round trip through both HTTP modes (structured and
// binary). Prints one summary line; exits 1 on the first failure.
"use strict";
const fs = require("fs");
const { CloudEvent, HTTP } = require("cloudevents");

function fail(line, why) {
  console.error(`event on line ${line}: ${why}`);
  process.exit(1);
}

// Bytes of data as the SDK hands it back: a typed array of byte values (a
// Uint8Array, or a Uint32Array after structured mode), a string, or JSON.
function bytesOf(data) {
  if (ArrayBuffer.isView(data)) return Buffer.from(Array.from(data));
  if (typeof data === "string") return Buffer.from(data, "utf8");
  return Buffer.from(JSON.stringify(data), "utf8");
}

function sameData(a, b) {
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) return bytesOf(a).equals(bytesOf(b));
  return JSON.stringify(a) === JSON.stringify(b);
}

const lines = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
if (lines.length === 0) fail(0, "no events to check");
let binaryData = 0;
let jsonData = 0;
let textData = 0;
lines.forEach((text, i) => {
  const line = i + 1;
  const exported = JSON.parse(text);
  let event;
  try {
    event = new CloudEvent(exported);  // validates (strict)
    event.validate();
  } catch (e) {
    fail(line, `does not validate: ${e.message} ${JSON.stringify(e.errors || [])}`);
  }
  if (exported.data_base64 !== undefined) {
    binaryData++;
    if (!bytesOf(event.data).equals(Buffer.from(exported.data_base64, "base64"))) fail(line, "data_base64 decodes to other bytes");
  } else if (typeof exported.data === "string") {
    textData++;
  } else {
    jsonData++;
  }
  for (const [mode, encode] of [["structured", HTTP.structured], ["binary", HTTP.binary]]) {
    const message = encode(event);
    const back = HTTP.toEvent({ headers: message.headers, body: message.body });
    for (const attr of ["id", "source", "type", "subject", "specversion", "datacontenttype",
                        "traceparent", "subjectversion", "correlationid", "causationid", "walbusseq"]) {
      if (back[attr] !== exported[attr]) fail(line, `${mode}: ${attr} ${back[attr]} != ${exported[attr]}`);
    }
    if (new Date(back.time).getTime() !== new Date(exported.time).getTime()) fail(line, `${mode}: time ${back.time} != ${exported.time}`);
    const expected = exported.data_base64 !== undefined ? Buffer.from(exported.data_base64, "base64") : exported.data;
    if (!sameData(back.data, expected)) fail(line, `${mode}: data does not survive: ${JSON.stringify(back.data)}`);
  }
});
console.log(`${lines.length} events valid and round-tripped (${jsonData} JSON data, ${textData} text, ${binaryData} binary)`);
