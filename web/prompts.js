// Prompt boxes: the served model's example prompts as clickable chips, the protocol's length
// limit with a live count, and a visible message for a prompt that cannot be sent.

export const DEFAULT_MAX_PROMPT_CHARS = 2000; // docs/protocol.md's limit when the server announces none

// The served model's example prompts as GET /v1/capacity names them ([] where it names none or cannot
// be asked), so a page shows them before it has a session of its own, and when it is refused one.
export async function servedExamples() {
  try {
    const response = await fetch("v1/capacity", { cache: "no-store" });
    if (!response.ok) return [];
    const examples = (await response.json()).prompt_examples;
    return Array.isArray(examples) ? examples : [];
  } catch {
    return [];
  }
}

// One button per example in `container`; a click calls onPick(example).
export function renderExamples(container, examples, onPick) {
  container.replaceChildren();
  container.hidden = !examples || !examples.length;
  for (const example of examples || []) {
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = "chip";
    chip.textContent = example;
    chip.onclick = () => onPick(example);
    container.appendChild(chip);
  }
}

// Keeps `box` within `max` characters (typed, pasted or set by a script) and shows
// "n / max" in `counter`; `onTrim` hears when text had to be cut.
export function limitPrompt(box, counter, max, onTrim) {
  box.maxLength = max;
  const update = () => {
    if (box.value.length > max) {
      box.value = box.value.slice(0, max);
      onTrim(max);
    }
    counter.textContent = `${box.value.length} / ${max}`;
    counter.classList.toggle("full", box.value.length >= max);
  };
  box.addEventListener("input", update);
  update();
  return update;
}

// A short message next to a prompt box (role=alert, so screen readers say it too).
export function promptMessage(element) {
  return (text, kind = "warn") => {
    element.textContent = text;
    element.className = text ? `message ${kind}` : "message";
    element.hidden = !text;
  };
}
