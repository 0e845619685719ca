// The served model's own check of its picture: a `picture` message arrives on each change of
// verdict. When the picture has degraded the World page says so over the video, in the model's
// words (what is wrong), and that it is the model, not the connection; nothing hides it.
export function pictureNotice(message) {
  if (message.ok) return { hidden: true, text: "" };
  return {
    hidden: false,
    text: `The model's picture has degraded: ${message.why || "it no longer looks like its world"}. ` +
      "This is the model, not your connection; a new prompt or a new session starts it afresh.",
  };
}
