// The API's interactive documentation (GET /docs): Swagger UI on this server's OpenAPI.
// Swagger UI comes from a CDN (docs.html). Where the browser cannot load it (an air-gapped
// deployment, or a file that failed its integrity check), the page says so and links the
// schema itself, instead of staying blank. Text only (textContent), as in the console.
if (typeof SwaggerUIBundle === "function") {
  SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });
} else {
  const box = document.getElementById("swagger-ui");
  const p = document.createElement("p");
  p.id = "docs-offline";
  p.textContent = "The interactive documentation needs Swagger UI from cdn.jsdelivr.net, " +
    "which this browser could not load (no network, or the file failed its integrity " +
    "check). The API's OpenAPI schema is served here at ";
  const a = document.createElement("a");
  a.href = "/openapi.json";
  a.textContent = "/openapi.json";
  p.appendChild(a);
  p.appendChild(document.createTextNode("; docs/service.md describes every endpoint."));
  box.appendChild(p);
}
