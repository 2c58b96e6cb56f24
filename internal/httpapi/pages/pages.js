// Enhances the pages' forms, which work without it: a form is sent once,
// however often its button is pressed, so a second press cannot spend a
// one-time code that the first one already used.
"use strict";
for (const form of document.querySelectorAll('form[method="post"]')) {
  const button = form.querySelector('button[type="submit"]');
  const label = button ? button.textContent : "";
  form.addEventListener("submit", (event) => {
    if (form.dataset.sent === "true") {
      event.preventDefault();
      return;
    }
    form.dataset.sent = "true";
    if (button) {
      button.setAttribute("aria-disabled", "true");
      if (button.dataset.busy) button.textContent = button.dataset.busy;
    }
  });
  // A page restored from the back-forward cache may be sent again.
  window.addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    delete form.dataset.sent;
    if (button) {
      button.removeAttribute("aria-disabled");
      button.textContent = label;
    }
  });
}
