// The Overview's client parts: the filter every panel applies (address, client name, group, domain)
// in words, and the top clients, shown by the name the `clients` provider gave them with the address
// on hover.

import { BarList } from "../components/bars";
import type { Filters, TopClients } from "../recorder";

/** The filter every panel applies. */
export type PanelFilter = Pick<Filters, "qname" | "client_ip" | "client_name" | "group">;
export type PickWhat = "client_ip" | "client_name" | "qname";

export const NO_FILTER: PanelFilter = { client_ip: "", client_name: "", group: "", qname: "" };

/** "from client annas-phone, from clients in group kids and for names containing “ads”". */
export function filterText(f: PanelFilter): string {
  const parts = [
    f.client_ip && `from addresses containing “${f.client_ip}”`,
    f.client_name && `from client ${f.client_name}`,
    f.group && `from clients in group ${f.group}`,
    f.qname && `for names containing “${f.qname}”`,
  ].filter((p) => p !== "");
  return parts.length < 2 ? parts.join("") : `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}`;
}

/**
 * Top clients by name, the address (of the newest query) on hover. A row keyed by a client's name (by=name)
 * is picked by that name (the client may ask from several addresses), the others by their address.
 */
export function TopClientList({ rows, pick }: { rows: TopClients["rows"]; pick: (what: PickWhat, key: string) => void }) {
  const byName = new Set(rows.filter((r) => r.client_name !== null && r.key === r.client_name).map((r) => r.key));
  return (
    <BarList
      testId="top-clients"
      rows={rows.map((r) =>
        r.client_name === null
          ? r
          : {
              ...r,
              label: (
                <span class="client-name" title={r.client_ip} data-name={r.client_name}>
                  {r.client_name}
                </span>
              ),
            },
      )}
      onPick={(k) => pick(byName.has(k) ? "client_name" : "client_ip", k)}
      pickLabel="Filter every panel by client"
    />
  );
}
