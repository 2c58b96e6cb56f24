// Sends the code on the page to the API when the person presses the button,
// and shows the answer.
"use strict";
const form = document.getElementById("use-code");
const result = document.getElementById("result");
const detail = document.getElementById("detail");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  result.textContent = "…";
  detail.hidden = true;
  try {
    const response = await fetch(form.dataset.endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code: form.elements.code.value.trim() }),
    });
    const body = await response.json();
    if (!response.ok) {
      result.textContent = body.title || "That did not work.";
      return;
    }
    const user = body.user || body;
    result.textContent = body.token
      ? "Signed in as " + user.email + ". Your session token:"
      : "Your address is now " + user.email + ".";
    if (body.token) {
      detail.textContent = body.token;
      detail.hidden = false;
    }
    form.hidden = true;
  } catch (err) {
    result.textContent = "The service did not answer: " + err;
  }
});
