import { useEffect, useRef, useState } from "react";
import { type ApiError, apiError, Code, isCanceled } from "../api";
import { parseRoute, type Route } from "./route";

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const f = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);
  return route;
}

export interface Polled<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loaded: boolean;
  /** performance.now() when the latest answer arrived. */
  at: number;
}

/**
 * usePoll calls fetch now and every interval while the tab is visible,
 * starting over when key changes. It stops on permission_denied or
 * unauthenticated: asking again will not change the answer.
 */
export function usePoll<T>(key: string, fetch: (signal: AbortSignal) => Promise<T>, interval = 2000): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ data: undefined, error: undefined, loaded: false, at: 0 });
  const fetchRef = useRef(fetch);
  fetchRef.current = fetch;

  useEffect(() => {
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    let stopped = false;
    setState({ data: undefined, error: undefined, loaded: false, at: 0 });

    const schedule = () => {
      clearTimeout(timer);
      if (!stopped && !document.hidden) timer = setTimeout(tick, interval);
    };
    const tick = async () => {
      if (running || stopped || ctl.signal.aborted) return;
      running = true;
      try {
        const data = await fetchRef.current(ctl.signal);
        if (ctl.signal.aborted) return;
        setState({ data, error: undefined, loaded: true, at: performance.now() });
      } catch (e) {
        if (ctl.signal.aborted || isCanceled(e)) return;
        const err = apiError(e);
        if (err.code === Code.PermissionDenied || err.code === Code.Unauthenticated) stopped = true;
        setState((s) => ({ ...s, error: err, loaded: true }));
      } finally {
        running = false;
      }
      schedule();
    };
    const onVisibility = () => {
      if (document.hidden) clearTimeout(timer);
      else void tick();
    };
    document.addEventListener("visibilitychange", onVisibility);
    void tick();
    return () => {
      ctl.abort();
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, [key, interval]);

  return state;
}
