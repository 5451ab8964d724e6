// The API, with the token from this tab's sessionStorage in the Authorization
// header (never in a URL). URLs are relative to the page, so a reverse proxy
// may serve everything under a path prefix.

const KEY = "infai-token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

function headers(more = {}) {
  return { Authorization: `Bearer ${token.get() ?? ""}`, ...more };
}

async function failed(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (response.status === 401) {
    window.dispatchEvent(new CustomEvent("infai-unauthorized"));
  }
  const message = body && typeof body.error === "string" ? body.error : response.statusText;
  return new ApiError(response.status, `${response.status}: ${message}`, body);
}

export async function api(method, path, body) {
  const init = { method, headers: headers(), cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`v1/${path}`, init);
  if (!response.ok) throw await failed(response);
  if (response.status === 204) return null;
  return response.json();
}

function parseFrame(block) {
  let name = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length === 0) return null;
  return { name, id, data: JSON.parse(data.join("\n")) };
}

// The session's Server-Sent Events over fetch (EventSource cannot send the
// token): onFrame({name, id, data}) for each, until the stream ends or
// signal aborts. `after`: replay the settled events after this one first.
export async function watch(sessionId, after, onFrame, signal) {
  const more = { Accept: "text/event-stream" };
  if (after) more["Last-Event-ID"] = after;
  const response = await fetch(`v1/sessions/${sessionId}/stream`, {
    headers: headers(more),
    signal,
    cache: "no-store",
  });
  if (!response.ok) throw await failed(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r/g, "");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const frame = parseFrame(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (frame) onFrame(frame);
      end = buffer.indexOf("\n\n");
    }
  }
}
