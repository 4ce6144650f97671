import { useState } from 'preact/hooks';
import type { Attributes } from '../access.js';
import { useCan } from '../hooks.js';

/** A button that runs an action the user may not be allowed to do: disabled, saying why, when RBAC says no. */
export function ActionButton({
  label,
  attrs,
  run,
  danger,
}: {
  label: string;
  attrs: Attributes;
  run: () => Promise<void>;
  danger?: boolean;
}) {
  const decision = useCan(attrs);
  const [busy, setBusy] = useState(false);
  const allowed = decision?.allowed === true;
  return (
    <button
      type="button"
      class={`action${danger ? ' danger' : ''}`}
      disabled={!allowed || busy}
      title={decision === undefined ? 'checking permissions…' : allowed ? label : decision.reason}
      data-action={label}
      data-busy={busy ? 'true' : undefined}
      onClick={async () => {
        setBusy(true);
        await run();
        setBusy(false);
      }}
    >
      {label}
    </button>
  );
}
