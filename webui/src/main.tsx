// Entry point: the dashboard renders into #app.

import { render } from "preact";
import { App } from "./app";
import "./styles/base.css";
import "./styles/components.css";
import "./styles/pages.css";

const root = document.getElementById("app");
if (root !== null) render(<App />, root);
