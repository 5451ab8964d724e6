// The branch tree: every event of every branch, in order, a branch indented
// where it leaves its parent's line; HEAD marked, and the event the next
// prompt follows. Picking an event shows what can be done with it.

import { api } from "./api.js";
import { clear, h, short, when } from "./dom.js";

// The events in depth-first order, each with its depth (a new branch: one deeper).
export function layout(entries) {
  const children = new Map();
  for (const entry of entries) {
    const list = children.get(entry.parent_seq) ?? [];
    list.push(entry);
    children.set(entry.parent_seq, list);
  }
  const order = [];
  const stack = (children.get(-1) ?? []).map((entry, i) => [entry, i]).reverse();
  while (stack.length) {
    const [entry, depth] = stack.pop();
    order.push([entry, depth]);
    const kids = children.get(entry.seq) ?? [];
    for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], depth + (i > 0 ? 1 : 0)]);
  }
  return order;
}

// The ids from the root to `tip`.
export function pathTo(entries, tip) {
  const bySeq = new Map(entries.map((e) => [e.seq, e]));
  const byId = new Map(entries.map((e) => [e.id, e]));
  const path = [];
  let entry = byId.get(tip);
  while (entry) {
    path.push(entry);
    entry = bySeq.get(entry.parent_seq);
  }
  return path.reverse();
}

export function renderTree(list, entries, head, next, picked, onPick) {
  clear(list);
  const onPath = new Set(pathTo(entries, next ?? head).map((e) => e.id));
  for (const [entry, depth] of layout(entries)) {
    const marks = [];
    if (entry.id === head) marks.push(h("span", { class: "mark head" }, "HEAD"));
    if (next && entry.id === next && next !== head) {
      marks.push(h("span", { class: "mark next" }, "next"));
    }
    const node = h("li", {
      class: `tree-node${onPath.has(entry.id) ? " on-path" : ""}${entry.id === picked ? " picked" : ""}`,
      dataset: { eventId: entry.id },
    },
    h("button", { type: "button", onclick: () => onPick(entry) },
      marks, h("span", { class: "kind" }, `${entry.kind}/${entry.role}`), " ",
      h("span", { class: "preview" }, entry.preview ?? "")));
    node.style.setProperty("--depth", String(Math.min(depth, 12)));
    list.append(node);
  }
}

function showFiles(out, got) {
  clear(out).append(h("p", {}, `files at snapshot ${short(got.snapshot)}:`));
  const list = h("ul", { class: "files" });
  for (const file of got.files) list.append(h("li", {}, `${file.path} (${file.size} bytes)`));
  for (const [path, why] of Object.entries(got.skipped ?? {})) {
    list.append(h("li", { class: "hint" }, `skipped: ${path} (${why})`));
  }
  if (got.files.length === 0) list.append(h("li", { class: "hint" }, "no files"));
  out.append(list);
}

function showDiff(out, got) {
  clear(out);
  for (const item of got.text) out.append(h("pre", { class: "diff" }, item.diff));
  for (const path of got.binary) out.append(h("p", {}, `binary: ${path}`));
  if (got.changes.length === 0) out.append(h("p", { class: "hint" }, "no changes"));
}

// The picked event's panel: continue from it, its files, its diff.
export function renderDetail(panel, sessionId, entry, parentId, onSelected) {
  const out = h("div", { class: "output" });
  const run = (work) => async () => {
    out.textContent = "…";
    try {
      await work();
    } catch (error) {
      clear(out).append(h("p", { class: "error" }, error.message));
    }
  };
  const q = (name, id) => `${name}=${encodeURIComponent(id)}`;
  const buttons = [
    h("button", { type: "button", dataset: { action: "continue" }, onclick: run(async () => {
      const answer = await api("POST", `sessions/${sessionId}/select`, { event_id: entry.id });
      out.textContent = "The next prompt continues from here.";
      onSelected(answer);
    }) }, "Continue from here"),
    h("button", { type: "button", dataset: { action: "files" }, onclick: run(async () => {
      showFiles(out, await api("GET", `sessions/${sessionId}/files?${q("event", entry.id)}`));
    }) }, "Files"),
  ];
  if (parentId) {
    buttons.push(h("button", { type: "button", dataset: { action: "diff" }, onclick: run(async () => {
      const path = `sessions/${sessionId}/diff?${q("from", parentId)}&${q("to", entry.id)}`;
      showDiff(out, await api("GET", path));
    }) }, "Diff"));
  }
  clear(panel).append(
    h("p", { class: "meta" }, `${entry.kind}/${entry.role} · ${short(entry.id)} · ${when(entry.timestamp)}`),
    h("p", { class: "preview" }, entry.preview ?? ""),
    h("div", { class: "row" }, buttons),
    out,
  );
}
