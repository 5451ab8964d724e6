// One stored event as the conversation shows it. Tool calls and results are
// folded (<details>); every string goes in as text.

import { h } from "./dom.js";

function text(value) {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return "";
  return JSON.stringify(value, null, 2);
}

function firstLine(value, limit = 100) {
  const line = text(value).split("\n", 1)[0];
  return line.length > limit ? `${line.slice(0, limit)}…` : line;
}

function message(event, record) {
  const parts = [];
  if (record.reasoning) {
    parts.push(h("details", { class: "reasoning" }, h("summary", {}, "reasoning"),
      h("div", { class: "text" }, text(record.reasoning))));
  }
  parts.push(h("div", { class: "text" }, text(record.content)));
  return h("li", { class: `msg ${event.role}` }, h("span", { class: "who" }, event.role), parts);
}

function toolCall(event, record) {
  const args = record.arguments ?? {};
  const subject = args.path ?? args.command ?? args.pattern ?? args.url ?? "";
  return h("li", { class: "tool call" },
    h("details", {},
      h("summary", {}, h("b", {}, text(record.name)), ` ${firstLine(subject, 80)}`),
      h("pre", {}, text(args))));
}

function toolResult(event, record) {
  const failed = record.is_error ? " error" : "";
  return h("li", { class: `tool result${failed}` },
    h("details", {},
      h("summary", {}, `${text(record.name)}: ${firstLine(record.content)}`),
      h("pre", {}, text(record.content))));
}

export function renderEvent(event) {
  const record = event.record ?? {};
  let item;
  if (event.kind === "message" && record.metadata?.interrupted) {
    item = h("li", { class: "meta interrupted" }, "turn interrupted");
  } else if (event.kind === "message" && (event.role === "user" || event.role === "assistant")) {
    item = message(event, record);
  } else if (event.kind === "tool_call") {
    item = toolCall(event, record);
  } else if (event.kind === "tool_result") {
    item = toolResult(event, record);
  } else {
    item = h("li", { class: "meta" }, `${event.kind}/${event.role}: ${event.preview ?? ""}`);
  }
  item.dataset.eventId = event.id;
  return item;
}
