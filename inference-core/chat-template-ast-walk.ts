/**
 * The one walk over a parsed @huggingface/jinja template that the
 * chat-template passes share (jinja2 printing, loop controls, segments):
 * depth first from the Program node, each object visited once (the template
 * is the server's, so its depth is bounded, but no recursion is needed).
 * `visit` pushes the children to walk next; non-objects pushed are skipped.
 */
export function walkTemplateAst(root: unknown, visit: (node: object, push: (...children: unknown[]) => void) => void): void {
  const seen = new Set<unknown>();
  const stack: unknown[] = [root];
  const push = (...children: unknown[]): void => {
    stack.push(...children);
  };
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object' || seen.has(node)) continue;
    seen.add(node);
    visit(node, push);
  }
}

/** The object-valued fields of `node` (not a Map's entries), for `push`. */
export function objectChildren(node: object): object[] {
  return Object.values(node).filter((child): child is object => child !== null && typeof child === 'object');
}
