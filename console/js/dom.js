// DOM helpers. Every value that can come from an agent (code, output, tool names, arguments, agent
// names) reaches the page through text nodes only: el() turns strings into Text nodes and sets
// attributes with setAttribute; nothing here parses HTML.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

const LONG = 2000;
// A long value shown truncated, with a button that shows it whole (as text).
export function longText(value, tag = 'pre') {
  const text = String(value ?? '');
  const node = el(tag, { tabindex: tag === 'pre' ? 0 : null }, text.length > LONG ? text.slice(0, LONG) + '…' : text);
  if (text.length <= LONG) return node;
  const more = el('button', { type: 'button', onclick: () => { node.textContent = text; more.remove(); } },
    `show all ${text.length} characters`);
  return el('div', {}, node, more);
}

export function time(value) {
  return typeof value === 'string' ? value.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}
