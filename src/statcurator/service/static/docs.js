// The API's interactive documentation (GET /docs): Swagger UI on this server's OpenAPI.
// Swagger UI's files come from this server (docs.html; the fastapi-offline package installed
// with statcurator). Where the browser could not load them (a broken install: the server
// answers 404), the page says so and links the schema itself, instead of staying blank.
// Text only (textContent), as in the console.
if (typeof SwaggerUIBundle === "function") {
  // validatorUrl null: no badge fetched from validator.swagger.io (the page stays offline)
  SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", validatorUrl: null });
} else {
  const box = document.getElementById("swagger-ui");
  const p = document.createElement("p");
  p.id = "docs-offline";
  p.textContent = "The interactive documentation needs Swagger UI, which this browser could " +
    "not load from this server (/docs/swagger-ui-bundle.js): its files come with the " +
    "Python package fastapi-offline, a dependency of statcurator's service, so they are " +
    "most likely missing from the server's environment (that URL then answers 404 and " +
    "says so). To fix it, reinstall statcurator with its service dependencies " +
    "(pip install -e '.[service]') and restart the server. Meanwhile the API's OpenAPI " +
    "schema is served here at ";
  const a = document.createElement("a");
  a.href = "/openapi.json";
  a.textContent = "/openapi.json";
  p.appendChild(a);
  p.appendChild(document.createTextNode("; docs/service.md describes every endpoint."));
  box.appendChild(p);
}
