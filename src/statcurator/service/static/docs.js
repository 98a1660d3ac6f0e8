// The API's interactive documentation (GET /docs): Swagger UI on this server's OpenAPI.
SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });
