export interface HttpMetrics {
  record(method: string, route: string, status: number): void;
  snapshot(): { method: string; route: string; status: number; count: number }[];
}

export function createHttpMetrics(): HttpMetrics {
  const counts = new Map<string, number>();
  return {
    record(method, route, status) {
      const key = `${method}\u0000${route}\u0000${status}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    },
    snapshot() {
      return [...counts].map(([key, count]) => {
        const [method = '', route = '', status = '0'] = key.split('\u0000');
        return { method, route, status: Number(status), count };
      });
    },
  };
}

export function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}
