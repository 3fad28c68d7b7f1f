// Journal load for the Live view: exec.output records of one agent appended through domed's control
// command audit.record (the path `dome run` uses), in batches, at a steady rate.
import net from 'node:net';

function controlCall(socket, command, args) {
  return new Promise((resolve, reject) => {
    const connection = net.createConnection(socket);
    let answer = '';
    connection.on('connect', () => connection.write(`${JSON.stringify({ command, args })}\n`));
    connection.on('data', (chunk) => {
      answer += chunk;
      const newline = answer.indexOf('\n');
      if (newline < 0) return;
      connection.end();
      try {
        const parsed = JSON.parse(answer.slice(0, newline));
        if (parsed.ok) resolve(parsed.result); else reject(new Error(parsed.error));
      } catch (error) { reject(error); }
    });
    connection.on('error', reject);
  });
}

// Append `rate` events a second for `seconds` seconds (batches every 100 ms); returns how many.
export async function journalLoad(socket, { agent = 'load-agent', rate = 1000, seconds = 10 } = {}) {
  const batch = Math.max(1, Math.round(rate / 10));
  const start = Date.now();
  let sent = 0;
  for (let tick = 0; tick < seconds * 10; tick++) {
    const records = [];
    for (let i = 0; i < batch; i++)
      records.push({ type: 'exec.output', exec_id: `load${tick}`, agent, tool: 'dome-run', policy_version: '0', stream: 'stdout', offset_ms: i, data: `line ${sent + i}\n`, bytes: 10 });
    await controlCall(socket, 'audit.record', { records });
    sent += batch;
    const due = start + (tick + 1) * 100;
    if (Date.now() < due) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
  }
  return { sent, seconds: (Date.now() - start) / 1000 };
}
