// Inclusion proofs checked in the browser, so that the reader need not trust domed for them
// (docs/journal-format.md sections 4, 5 and 8; RFC 9162 section 2.1.3.2): the event's leaf hash
// SHA-256(0x00 || line), the audit path up to the root, the root against the checkpoint, and the
// checkpoint's Ed25519 signature over "dome-journal-checkpoint/1\n<tree_size>\n<root>\n<time>\n"
// with the journal's public key (WebCrypto SHA-256 and Ed25519).
const encoder = new TextEncoder();

function hexToBytes(hex, bytes, what) {
  if (typeof hex !== 'string' || hex.length !== bytes * 2 || !/^[0-9a-f]+$/i.test(hex))
    throw new Error(`${what}: expected ${bytes * 2} hex digits`);
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}
const toHex = (bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');

async function sha256(...parts) {
  const length = parts.reduce((n, p) => n + p.length, 0);
  const joined = new Uint8Array(length);
  let at = 0;
  for (const part of parts) { joined.set(part, at); at += part.length; }
  return new Uint8Array(await crypto.subtle.digest('SHA-256', joined));
}
const leafHash = (line) => sha256(Uint8Array.of(0), encoder.encode(line));
const nodeHash = (left, right) => sha256(Uint8Array.of(1), left, right);

// The key id domed writes in checkpoints: the first 8 bytes of SHA-256(public key), hex.
export async function keyId(publicKeyHex) {
  return toHex((await sha256(hexToBytes(publicKeyHex, 32, 'public key'))).slice(0, 8));
}

// Check `proof` (as GET /console/api/proof or `dome audit prove` gives it) against `publicKeyHex`.
// Returns {ok: true, seq, treeSize, keyId} or {ok: false, reason}.
export async function verifyProof(proof, publicKeyHex) {
  try {
    if (!proof || typeof proof.event !== 'string' || !Array.isArray(proof.audit_path))
      throw new Error('proof: missing event or audit_path');
    const checkpointEvent = proof.checkpoint;
    const checkpoint = checkpointEvent?.checkpoint;
    if (!checkpoint) throw new Error('proof: missing checkpoint');
    let fn = Number(proof.leaf_index);
    let sn = Number(proof.tree_size) - 1;
    if (!Number.isSafeInteger(fn) || !Number.isSafeInteger(sn) || fn < 0 || fn > sn) throw new Error('proof: leaf_index outside the tree');
    const event = JSON.parse(proof.event);
    if (event.seq !== fn + 1) throw new Error(`proof: the event is seq ${event.seq}, the leaf is ${fn + 1}`);
    let r = await leafHash(proof.event);
    for (const [i, hex] of proof.audit_path.entries()) {
      const p = hexToBytes(hex, 32, `audit_path[${i}]`);
      if (sn === 0) throw new Error('proof: audit path longer than the tree is deep');
      if ((fn & 1) === 1 || fn === sn) {
        r = await nodeHash(p, r);
        if ((fn & 1) === 0) while ((fn & 1) === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      } else {
        r = await nodeHash(r, p);
      }
      fn = Math.floor(fn / 2);
      sn = Math.floor(sn / 2);
    }
    const root = toHex(r);
    if (sn !== 0 || root !== String(proof.root).toLowerCase()) throw new Error('the audit path does not lead from the event to the root');
    if (checkpoint.root !== root) throw new Error('the root differs from the one the checkpoint signs');
    if (checkpoint.tree_size !== Number(proof.tree_size) || checkpointEvent.seq !== checkpoint.tree_size + 1)
      throw new Error('the tree size differs from the checkpoint\'s');
    const id = await keyId(publicKeyHex);
    if (checkpoint.key_id !== id) throw new Error(`the checkpoint is signed by key ${checkpoint.key_id}, not by ${id}`);
    const key = await crypto.subtle.importKey('raw', hexToBytes(publicKeyHex, 32, 'public key'), { name: 'Ed25519' }, false, ['verify']);
    const message = encoder.encode(`dome-journal-checkpoint/1\n${checkpoint.tree_size}\n${checkpoint.root}\n${checkpointEvent.time}\n`);
    const signed = await crypto.subtle.verify({ name: 'Ed25519' }, key, hexToBytes(checkpoint.signature, 64, 'signature'), message);
    if (!signed) throw new Error('the checkpoint\'s Ed25519 signature does not verify');
    return { ok: true, seq: event.seq, treeSize: checkpoint.tree_size, keyId: id };
  } catch (error) {
    return { ok: false, reason: error.message };
  }
}
