public enum RabbitMQModule {}
