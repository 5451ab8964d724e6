// The page: log in with the server's token, list sessions, open one.
// Routes live in the URL's fragment (#s=SESSION), never the token.

import { api, token } from "./api.js";
import { clear, h, short, when } from "./dom.js";
import { SessionView } from "./session.js";

const main = document.getElementById("main");
const where = document.getElementById("where");
const logout = document.getElementById("logout");
let current = null;

function showLogin(message) {
  logout.hidden = true;
  where.textContent = "";
  const input = h("input", {
    type: "password",
    id: "token",
    autocomplete: "current-password",
    required: true,
    minlength: 16,
    placeholder: "the server token",
  });
  const problem = h("p", { class: "error", role: "alert" }, message ?? "");
  const form = h(
    "form",
    { id: "login", class: "card", method: "post" },
    h("h1", {}, "Log in"),
    h("p", { class: "hint" }, "The token of `infai serve` (its HOME/server-token file). ",
      "It stays in this tab only."),
    h("label", { for: "token" }, "Token"),
    input,
    h("button", { type: "submit" }, "Log in"),
    problem,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    try {
      await api("GET", "sessions");
    } catch (error) {
      token.clear();
      problem.textContent = error.status === 401 ? "That is not the server's token." : error.message;
      return;
    }
    route();
  });
  clear(main).append(form);
  input.focus();
}

async function showList() {
  logout.hidden = false;
  where.textContent = "sessions";
  const list = h("ul", { id: "sessions", class: "sessions" });
  const name = h("input", { type: "text", id: "new-name", placeholder: "name (optional)" });
  const problem = h("p", { class: "error", role: "alert" });
  const create = h("form", { id: "new-session", class: "row" }, name,
    h("button", { type: "submit" }, "New session"));
  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = name.value.trim() ? { name: name.value.trim() } : {};
      const made = await api("POST", "sessions", body);
      location.hash = `#s=${made.id}`;
    } catch (error) {
      problem.textContent = error.message;
    }
  });
  clear(main).append(h("section", { class: "card" }, h("h1", {}, "Sessions"), create, problem, list));
  try {
    const { sessions } = await api("GET", "sessions");
    if (sessions.length === 0) list.append(h("li", { class: "hint" }, "No sessions yet."));
    for (const item of sessions) {
      list.append(h("li", {},
        h("a", { href: `#s=${item.id}`, class: "session", dataset: { sessionId: item.id } },
          h("span", { class: "title" }, item.title || item.name || short(item.id)),
          h("span", { class: "meta" },
            `${item.events ?? 0} events · ${when(item.updated_at)} · ${item.working_dir ?? ""}`))));
    }
  } catch (error) {
    problem.textContent = error.message;
  }
}

function route() {
  if (current) current.close();
  current = null;
  if (!token.get()) {
    showLogin();
    return;
  }
  const match = /^#s=([0-9a-fA-F-]{36})$/.exec(location.hash);
  if (match) {
    logout.hidden = false;
    current = new SessionView(main, match[1].toLowerCase(), where);
    current.open();
  } else {
    showList();
  }
}

logout.addEventListener("click", () => {
  token.clear();
  route();
});
window.addEventListener("hashchange", route);
window.addEventListener("infai-unauthorized", () => {
  if (document.getElementById("login")) return; // the form says so itself
  token.clear();
  if (current) current.close();
  current = null;
  showLogin("The server refused the token: log in again.");
});
route();
