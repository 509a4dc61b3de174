// conceptforge annotation page: one item at a time, answered with the keyboard (or the mouse).
// No external assets; talks only to the server that served it.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
  const state = { study: null, annotator: null, item: null, answers: {}, active: 0, shownAt: 0, busy: false };

  async function api(path, options) {
    const response = await fetch(path, options);
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const error = new Error((body && body.error) || response.statusText);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  // Network failures (server restarting, Wi-Fi drop) are retried; HTTP errors are not.
  async function withRetry(call) {
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await call();
        if (attempt) $("status").textContent = "";
        return result;
      } catch (error) {
        if (error.status !== undefined || attempt >= 30) throw error;
        $("status").textContent = "connection lost – retrying…";
        await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** attempt, 4000)));
      }
    }
  }

  function updateProgress(progress) {
    const share = progress.total ? progress.done / progress.total : 0;
    $("fill").style.width = (100 * share).toFixed(1) + "%";
    $("progress-text").textContent = `${progress.done} done · ${progress.remaining} remaining`;
  }

  function questions() { return state.item ? state.item.questions : []; }
  function complete() { return questions().every((q) => q.id in state.answers); }

  function renderState() {
    document.querySelectorAll(".question").forEach((div, index) => {
      const q = questions()[index];
      if (!q) return;
      div.classList.toggle("active", index === state.active);
      div.querySelectorAll("button").forEach((button) => {
        button.classList.toggle("chosen", q.id in state.answers && String(state.answers[q.id]) === button.dataset.value);
      });
    });
    $("submit").disabled = !complete() || state.busy;
  }

  function makeButton(option, onClick) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.value = String(option.value);
    const kbd = document.createElement("kbd");
    kbd.textContent = option.key;
    button.append(kbd, document.createTextNode(option.label));
    button.addEventListener("click", onClick);
    return button;
  }

  function show(payload) {
    updateProgress(payload.progress);
    if (payload.done) {
      state.item = null;
      $("questions").replaceChildren();
      $("task").hidden = true;
      $("finished").hidden = false;
      $("finished-text").textContent = `${state.annotator} answered all ${payload.progress.total} items of this study.`;
      return;
    }
    const item = payload.item;
    Object.assign(state, { item, answers: {}, active: 0, shownAt: performance.now() });
    $("finished").hidden = true;
    $("task").hidden = false;
    $("task").dataset.itemId = item.item_id;
    $("instructions").textContent = state.study.instructions;
    $("image").src = item.image;
    $("references").replaceChildren(...item.references.map((src, index) => {
      const figure = document.createElement("figure");
      const img = document.createElement("img");
      img.src = src;
      img.alt = `reference ${index + 1}`;
      const caption = document.createElement("figcaption");
      caption.textContent = `reference ${index + 1}`;
      figure.append(img, caption);
      return figure;
    }));
    $("figure").classList.toggle("with-refs", item.references.length > 0);
    $("caption").textContent = item.display.caption ? `“${item.display.caption}”` : "";
    $("questions").replaceChildren(...item.questions.map((q, index) => {
      const div = document.createElement("div");
      div.className = "question";
      div.dataset.question = q.id;
      const text = document.createElement("p");
      text.textContent = q.text;
      const options = document.createElement("div");
      options.className = "options";
      options.append(...q.options.map((option) => makeButton(option, () => choose(index, option.value))));
      div.append(text, options);
      return div;
    }));
    for (const url of payload.preload || []) new Image().src = url;
    renderState();
  }

  function choose(index, value) {
    const qs = questions();
    state.answers[qs[index].id] = value;
    let next = index + 1;
    while (next < qs.length && qs[next].id in state.answers) next++;
    state.active = next < qs.length ? next : qs.length;
    renderState();
  }

  async function submit() {
    if (!complete() || state.busy) return;
    state.busy = true;
    renderState();
    const body = {
      annotator: state.annotator,
      item_id: state.item.item_id,
      answers: state.answers,
      elapsed_ms: Math.round(performance.now() - state.shownAt),
    };
    try {
      show(await withRetry(() => api("/api/answer", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      })));
      $("status").textContent = "";
    } catch (error) {
      if (error.status === 409) {  // answered in another tab: move on
        show(await withRetry(() => api("/api/next?annotator=" + encodeURIComponent(state.annotator))));
      } else {
        $("status").textContent = "not saved: " + error.message;
      }
    } finally {
      state.busy = false;
      renderState();
    }
  }

  document.addEventListener("keydown", (event) => {
    if (!state.item || $("task").hidden || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!$("login").hidden) return;
    const key = event.key.toLowerCase();
    const qs = questions();
    if (key === "enter") {
      event.preventDefault();
      submit();
    } else if (key === "backspace") {
      event.preventDefault();
      if (state.active > 0) {
        state.active -= 1;
        delete state.answers[qs[state.active].id];
        renderState();
      }
    } else {
      const index = Math.min(state.active, qs.length - 1);
      const option = qs[index].options.find((o) => o.key === key);
      if (option) {
        event.preventDefault();
        choose(index, option.value);
      }
    }
  });
  $("submit").addEventListener("click", submit);

  async function begin(name) {
    state.annotator = name;
    try { localStorage.setItem("annotator", name); } catch (e) { /* private mode */ }
    const url = new URL(location.href);
    url.searchParams.set("annotator", name);
    history.replaceState(null, "", url);
    $("who").textContent = "annotator: " + name;
    show(await withRetry(() => api("/api/next?annotator=" + encodeURIComponent(name))));
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("annotator-input").value.trim();
    if (!NAME_RE.test(name)) return;
    $("annotator-input").blur();
    $("login").hidden = true;
    begin(name);
  });

  async function start() {
    state.study = await withRetry(() => api("/api/study"));
    $("title").textContent = state.study.title;
    document.title = state.study.title;
    let name = new URLSearchParams(location.search).get("annotator");
    if (!name) { try { name = localStorage.getItem("annotator"); } catch (e) { name = null; } }
    if (name && NAME_RE.test(name)) {
      begin(name);
    } else {
      $("login-instructions").textContent = state.study.instructions;
      $("login").hidden = false;
      $("annotator-input").focus();
    }
  }
  start();
})();
