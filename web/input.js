// Controller state for `action` messages: held keys, mouse movement since the last message,
// gamepad buttons and axes, limited to the session's action space.

export function keyName(code) {
  if (code.startsWith("Key")) return code.slice(3).toLowerCase();
  if (code.startsWith("Digit")) return code.slice(5);
  return code.toLowerCase(); // arrowup, space, shiftleft, ...
}

export class Controller {
  constructor(space, target) {
    this.space = space || {};
    this.allowed = Array.isArray(this.space.keys) ? new Set(this.space.keys) : null;
    this.held = new Set();
    this.mouse = [0, 0];
    this.changed = false;
    target.addEventListener("keydown", (e) => this.key(e, true));
    target.addEventListener("keyup", (e) => this.key(e, false));
    target.addEventListener("blur", () => { this.held.clear(); this.changed = true; });
    if (this.space.mouse) {
      target.addEventListener("mousemove", (e) => {
        if (document.pointerLockElement) { this.mouse[0] += e.movementX; this.mouse[1] += e.movementY; this.changed = true; }
      });
    }
  }

  key(event, down) {
    if (event.target instanceof HTMLInputElement || event.target instanceof HTMLTextAreaElement) return;
    let name = keyName(event.code);
    if (this.allowed && !this.allowed.has(name)) name = name.replace(/(left|right)$/, ""); // shiftleft -> shift
    if (this.allowed && !this.allowed.has(name)) return;
    event.preventDefault();
    if (down === this.held.has(name)) return;
    if (down) this.held.add(name); else this.held.delete(name);
    this.changed = true;
  }

  gamepad() {
    const nButtons = this.space.buttons || 0;
    const nAxes = this.space.axes || 0;
    const pads = navigator.getGamepads ? navigator.getGamepads().filter(Boolean) : [];
    if (!pads.length || (!nButtons && !nAxes)) return null;
    const pad = pads[0];
    let buttons = 0;
    pad.buttons.slice(0, nButtons).forEach((b, i) => { if (b.pressed) buttons |= 1 << i; });
    const axes = pad.axes.slice(0, nAxes).map((a) => Math.max(-1, Math.min(1, Math.abs(a) < 0.08 ? 0 : a)));
    return { buttons, axes };
  }

  // The next action's fields, or null when nothing is held, moving or changed.
  sample() {
    const pad = this.gamepad();
    const padActive = pad && (pad.buttons || pad.axes.some((a) => a !== 0));
    const moving = this.mouse[0] !== 0 || this.mouse[1] !== 0;
    if (!this.held.size && !padActive && !moving && !this.changed) return null;
    this.changed = false;
    const fields = { keys: [...this.held] };
    if (this.space.mouse) { fields.mouse = this.mouse; this.mouse = [0, 0]; }
    if (pad) { if (this.space.buttons) fields.buttons = pad.buttons; if (this.space.axes) fields.axes = pad.axes; }
    return fields;
  }
}
