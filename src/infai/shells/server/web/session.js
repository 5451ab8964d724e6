// One session: its conversation (the path to HEAD, or to the event the next
// prompt follows), the live turn as it streams, questions waiting for an
// answer, cancel, and the branch tree.

import { api, watch } from "./api.js";
import { clear, h, short } from "./dom.js";
import { renderEvent } from "./render.js";
import { pathTo, renderDetail, renderTree } from "./tree.js";

const SHOWN = 200; // the conversation's last events fetched in full
const ANSWERS = [["allow", "Allow"], ["allow-always", "Always"], ["deny", "Deny"]];

export class SessionView {
  constructor(root, id, where) {
    this.root = root;
    this.id = id;
    this.where = where;
    this.abort = new AbortController();
    this.events = new Map(); // full events by id (they never change)
    this.last = null; // the newest settled event seen (for Last-Event-ID)
    this.tip = null; // the last event the conversation shows
    this.turn = null;
    this.picked = null;
    this.generation = 0;
    this.build();
  }

  build() {
    this.status = h("span", { id: "status", class: "status" }, "");
    this.cancelButton = h("button", { type: "button", id: "cancel", hidden: true,
      onclick: () => this.cancel() }, "Cancel");
    this.messages = h("ol", { id: "messages", class: "messages" });
    this.live = h("div", { id: "live", class: "live", hidden: true });
    this.questions = h("div", { id: "approvals", class: "approvals" });
    this.problem = h("p", { class: "error", role: "alert" });
    this.restore = h("div", { id: "restore", class: "restore" });
    this.text = h("textarea", { id: "prompt-text", rows: 3, placeholder: "Ask…" });
    const prompt = h("form", { id: "prompt", class: "prompt" }, this.text,
      h("button", { type: "submit" }, "Send"));
    prompt.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) prompt.requestSubmit();
    });
    this.tree = h("ol", { id: "tree", class: "tree" });
    this.detail = h("div", { id: "event-detail", class: "detail" });
    clear(this.root).append(
      h("div", { class: "panes" },
        h("section", { class: "conversation" },
          this.messages, this.live, this.questions, this.problem, this.restore,
          h("div", { class: "row bar" }, this.status, this.cancelButton), prompt),
        h("aside", { class: "branches" },
          h("details", { open: true }, h("summary", {}, "Branches"), this.tree, this.detail))),
    );
  }

  async open() {
    try {
      await this.reload();
    } catch (error) {
      this.problem.textContent = error.message;
    }
    this.watchLoop();
  }

  close() {
    this.abort.abort();
  }

  // -- what is stored ------------------------------------------------------

  async fetchEvents(ids) {
    const missing = ids.filter((id) => !this.events.has(id));
    for (let i = 0; i < missing.length; i += 8) {
      const batch = missing.slice(i, i + 8);
      const got = await Promise.all(batch.map((id) => api("GET", `sessions/${this.id}/events/${id}`)));
      for (const event of got) this.events.set(event.id, event);
    }
  }

  async reload() {
    const generation = ++this.generation;
    const base = `sessions/${this.id}`;
    const [info, tree, head, waiting] = await Promise.all([
      api("GET", base), api("GET", `${base}/events?all=true`), api("GET", `${base}/head`),
      api("GET", `${base}/approvals`),
    ]);
    const next = head.pending_parent ?? head.head;
    const path = pathTo(tree.events, next);
    const wanted = path.slice(-SHOWN).map((e) => e.id);
    if (next && wanted.some((id) => !this.events.has(id))) {
      // the context since the last compaction, in one request: most of the path
      const context = await api("GET", `${base}/context?at=${encodeURIComponent(next)}`);
      const onPath = new Set(wanted);
      for (const event of context.events) if (onPath.has(event.id)) this.events.set(event.id, event);
    }
    await this.fetchEvents(wanted);
    if (generation !== this.generation || this.abort.signal.aborted) return;
    this.where.textContent = info.name || short(info.id);
    this.entries = tree.events;
    this.head = head;
    clear(this.messages);
    if (path.length > SHOWN) {
      this.messages.append(h("li", { class: "hint" }, `${path.length - SHOWN} earlier events`));
    }
    for (const entry of path.slice(-SHOWN)) this.messages.append(renderEvent(this.events.get(entry.id)));
    this.tip = next;
    const newest = tree.events.reduce((a, b) => (a && a.seq > b.seq ? a : b), null);
    if (newest && (!this.last || newest.seq > this.last.seq)) this.last = newest;
    this.setTurn(info.turn);
    clear(this.questions);
    for (const question of waiting.approvals) this.ask(question);
    this.drawTree();
  }

  drawTree() {
    renderTree(this.tree, this.entries, this.head.head, this.head.pending_parent, this.picked?.id,
      (entry) => this.pick(entry));
  }

  pick(entry) {
    this.picked = entry;
    const parent = this.entries.find((e) => e.seq === entry.parent_seq);
    renderDetail(this.detail, this.id, entry, parent?.id, () => this.reload());
    this.detail.scrollIntoView({ block: "nearest" });
    this.drawTree();
  }

  later() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.reload().catch((e) => {
      this.problem.textContent = e.message;
    }), 100);
  }

  // -- what streams ----------------------------------------------------------

  async watchLoop() {
    while (!this.abort.signal.aborted) {
      try {
        await watch(this.id, this.last?.id, (frame) => this.onFrame(frame), this.abort.signal);
      } catch (error) {
        if (this.abort.signal.aborted) return;
        this.problem.textContent = `stream: ${error.message}; reconnecting`;
        if (error.status === 401 || error.status === 404) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  onFrame({ name, data }) {
    const handlers = {
      ready: () => {
        this.problem.textContent = "";
        this.setTurn(data.turn);
      },
      turn_started: () => this.setTurn(data.turn),
      delta: () => this.delta(data),
      settled: () => this.settled(data),
      turn_ended: () => {
        this.setTurn(null);
        if (data.outcome === "error" && data.error) this.problem.textContent = data.error;
        this.later();
      },
      approval: () => this.ask(data),
      approval_resolved: () => this.questions.querySelector(`[data-id="${CSS.escape(data.id)}"]`)?.remove(),
      selected: () => this.later(),
      closed: () => {
        this.problem.textContent = `closed: ${data.reason ?? ""}`;
      },
    };
    handlers[name]?.();
  }

  setTurn(turn) {
    this.turn = turn ?? null;
    this.cancelButton.hidden = !this.turn;
    this.status.textContent = this.turn ? "working…" : "idle";
    this.status.dataset.state = this.turn ? "busy" : "idle";
    if (!this.turn) {
      clear(this.live);
      this.live.hidden = true;
    }
  }

  livePart(kind) {
    let part = this.live.querySelector(`.live-${kind}`);
    if (!part) {
      part = h("div", { class: `live-${kind}` });
      this.live.append(part);
    }
    this.live.hidden = false;
    return part;
  }

  delta(data) {
    if (data.kind === "text") this.livePart("text").append(data.text ?? "");
    else if (data.kind === "reasoning") this.livePart("reasoning").append(data.text ?? "");
    else if (data.kind === "tool_call") {
      const part = this.livePart("tools");
      if (data.name) part.append(h("div", { class: "call" }, `→ ${data.name} `));
      if (data.arguments) (part.lastElementChild ?? part).append(data.arguments);
    } else if (data.kind === "notice") {
      this.livePart("notice").append(h("div", {}, data.text ?? JSON.stringify(data)));
    }
  }

  async settled(event) {
    if (!this.last || event.seq > this.last.seq) this.last = event;
    if (event.parent_id !== this.tip && !(this.tip === null && /^0+-/.test(event.parent_id))) {
      this.later(); // not the next on the path shown: another branch, redraw it all
      return;
    }
    this.tip = event.id;
    if (event.kind === "message" && event.role === "assistant") {
      clear(this.live);
      this.live.hidden = true;
    }
    const place = h("li", { class: "meta" }, event.preview ?? "");
    this.messages.append(place);
    let full = event;
    if (event.record === null && event.digest) {
      await this.fetchEvents([event.id]);
      full = this.events.get(event.id);
    }
    this.events.set(event.id, full);
    place.replaceWith(renderEvent(full));
    this.refreshTree();
  }

  async refreshTree() {
    clearTimeout(this.treeTimer);
    this.treeTimer = setTimeout(async () => {
      try {
        const base = `sessions/${this.id}`;
        const [tree, head] = await Promise.all([
          api("GET", `${base}/events?all=true`), api("GET", `${base}/head`)]);
        this.entries = tree.events;
        this.head = head;
        this.drawTree();
      } catch (error) {
        this.problem.textContent = error.message;
      }
    }, 150);
  }

  // -- what the person does --------------------------------------------------

  ask(question) {
    if (this.questions.querySelector(`[data-id="${CSS.escape(question.id)}"]`)) return;
    const card = h("div", { class: "approval card", dataset: { id: question.id } },
      h("p", {}, h("b", {}, question.tool), ` ${question.subject ?? ""}`),
      h("p", { class: "hint" }, question.reason ?? ""),
      h("details", {}, h("summary", {}, "arguments"),
        h("pre", {}, JSON.stringify(question.arguments ?? {}, null, 2))));
    const row = h("div", { class: "row" });
    for (const [answer, label] of ANSWERS) {
      row.append(h("button", { type: "button", dataset: { answer }, onclick: async () => {
        try {
          await api("POST", `sessions/${this.id}/approvals`, { id: question.id, answer });
          card.remove();
        } catch (error) {
          this.problem.textContent = error.message;
        }
      } }, label));
    }
    card.append(row);
    this.questions.append(card);
  }

  async send(choice = {}) {
    const text = this.text.value;
    if (!text.trim()) return;
    this.problem.textContent = "";
    clear(this.restore);
    try {
      await api("POST", `sessions/${this.id}/prompt`, { text, ...choice });
      this.text.value = "";
    } catch (error) {
      this.problem.textContent = error.message;
      if (error.status === 409 && error.body?.plan) this.askRestore(error.body);
    }
  }

  // Continuing from an older event restores its files; files changed outside
  // the agent make that a question (409 with the plan): take theirs, or keep mine.
  askRestore(refusal) {
    const conflicts = refusal.plan.conflicts ?? [];
    const names = conflicts.map((c) => (typeof c === "string" ? c : c.path ?? JSON.stringify(c)));
    this.restore.append(
      h("p", {}, `Changed outside the agent: ${names.join(", ") || "(see above)"}`),
      h("div", { class: "row" },
        h("button", { type: "button", dataset: { restore: "force" },
          onclick: () => this.send({ force: true }) }, "Restore the event's files"),
        h("button", { type: "button", dataset: { restore: "keep" },
          onclick: () => this.send({ keep_files: true }) }, "Keep my files")));
  }

  async cancel() {
    try {
      const ended = await api("POST", `sessions/${this.id}/cancel`, {});
      this.status.textContent = `cancelled (${ended.outcome ?? "stopped"})`;
    } catch (error) {
      this.problem.textContent = error.message;
    }
  }
}
